package baselines

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

// Anchor-based recovery over sampled examples: the driver behind `baseline -attack anchor`.

// AnchorEvalOptions configures anchor-based recovery over sampled examples.
type AnchorEvalOptions struct {
	// Split is the split examples come from.
	Split data.Split
	// Examples is the number of examples, indices 0..Examples-1 of the split's stream (0: 2).
	Examples int
	// Anchors is k, the number of clean rows the attacker knows, drawn at random from H (0: 8).
	Anchors int
	// Anchor configures the recovery (method, ridge, FastICA).
	Anchor AnchorOptions
	// Seed seeds the choice of anchors and the random rows of the chance baseline.
	Seed uint64
}

// AnchorRow is anchor-based recovery over one sampler configuration.
type AnchorRow struct {
	// Method names the anchor method; Anchors is k.
	Method  string `json:"method"`
	Anchors int    `json:"anchors"`
	Split   string `json:"split"`
	// N and NClean are the mean numbers of rows of X and of H.
	N      float64 `json:"n"`
	NClean float64 `json:"n_clean"`
	// MixingErr is the mean over examples of ||Â_K - A_K||_F / ||A_K||_F over the observed rows of
	// A: how well the anchored part was recovered.
	MixingErr float64 `json:"mixing_err"`
	// P95AbsCos, MeanAbsCos, GramErr and GramErrAligned (see BSSRow) score the recovered
	// non-anchor sources against the clean rows that were not anchors, with random rows of the
	// split as chance; RandomRows is the mean number of them drawn per example.
	P95AbsCos      eval.Metric `json:"p95_abs_cos"`
	MeanAbsCos     eval.Metric `json:"mean_abs_cos"`
	GramErr        eval.Metric `json:"gram_err"`
	GramErrAligned eval.Metric `json:"gram_err_aligned"`
	RandomRows     float64     `json:"random_rows"`
	// Seconds is the mean run time of the recovery.
	Seconds float64 `json:"seconds"`
}

// AnchorEval gives the attacker k random clean rows of each example as anchors and scores what
// Anchors recovers of the anchored part (against the secret A) and of the other clean rows.
func AnchorEval(ctx context.Context, s *gelo.Sampler, opts AnchorEvalOptions) (AnchorRow, error) {
	if opts.Examples == 0 {
		opts.Examples = 2
	}
	if opts.Anchors == 0 {
		opts.Anchors = 8
	}
	if opts.Examples < 0 || opts.Anchors < 0 {
		return AnchorRow{}, fmt.Errorf("baselines: anchor eval: %d examples, %d anchors", opts.Examples, opts.Anchors)
	}
	row := AnchorRow{Method: opts.Anchor.Method.String(), Anchors: opts.Anchors, Split: opts.Split.String()}
	var acc classicalAcc
	var elapsed time.Duration
	for i := 0; i < opts.Examples; i++ {
		if err := ctx.Err(); err != nil {
			return AnchorRow{}, err
		}
		ex, err := s.Example(opts.Split, int64(i))
		if err != nil {
			return AnchorRow{}, err
		}
		if opts.Anchors >= ex.NClean {
			return AnchorRow{}, fmt.Errorf("baselines: %d anchors for %d clean rows in example %d", opts.Anchors, ex.NClean, i)
		}
		u, err := eval.FromFloat32(ex.NObs, ex.D, ex.UObs)
		if err != nil {
			return AnchorRow{}, err
		}
		h, err := eval.FromFloat32(ex.NClean, ex.D, ex.H)
		if err != nil {
			return AnchorRow{}, err
		}
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(i)))
		order := rng.Perm(ex.NClean)
		known, rest := order[:opts.Anchors], order[opts.Anchors:]
		anchors := mat.NewDense(len(known), ex.D, nil)
		for r, a := range known {
			anchors.SetRow(r, h.RawRowView(a))
		}
		others := mat.NewDense(len(rest), ex.D, nil)
		for r, a := range rest {
			others.SetRow(r, h.RawRowView(a))
		}
		start := time.Now()
		res, err := Anchors(ctx, u, anchors, opts.Anchor)
		if err != nil {
			return AnchorRow{}, fmt.Errorf("baselines: anchors on example %d: %w", i, err)
		}
		elapsed += time.Since(start)
		row.MixingErr += mixingError(ex, known, res.MixingK) / float64(opts.Examples)
		if err := acc.scoreVsRandom(s, opts.Split, ex, res.Rest.Sources, others, opts.Seed, opts.Seed+uint64(i)); err != nil {
			return AnchorRow{}, err
		}
		row.N += float64(ex.N) / float64(opts.Examples)
		row.NClean += float64(ex.NClean) / float64(opts.Examples)
	}
	row.P95AbsCos, row.MeanAbsCos = acc.p95.Metric(), acc.mean.Metric()
	row.GramErr, row.GramErrAligned = acc.gram.Metric(), acc.gramAligned.Metric()
	row.RandomRows = acc.meanDraws()
	row.Seconds = elapsed.Seconds() / float64(max(1, opts.Examples))
	return row, nil
}

// Table formats the anchor recovery: the mixing error, then the classical figures of the
// non-anchor sources beside random rows' (classicalTable).
func (r AnchorRow) Table() string {
	return fmt.Sprintf("anchors (%s, k %d) on %s: n %.0f (%.0f clean), %.1f s per example\n"+
		"mixing error ||Â_K - A_K||_F / ||A_K||_F: %.4f\nnon-anchor clean rows:\n",
		r.Method, r.Anchors, r.Split, r.N, r.NClean, r.Seconds, r.MixingErr) +
		classicalTable(r.Method, r.RandomRows, r.P95AbsCos, r.MeanAbsCos, r.GramErr, r.GramErrAligned)
}

// mixingError compares Â_K (n_obs, k) with the secret columns of A that multiply the anchor rows
// (H rows known[j], at X row i where Perm[i] = known[j]), restricted to the observed rows.
func mixingError(ex *gelo.Example, known []int, ak *mat.Dense) float64 {
	xRow := make(map[int]int, ex.N)
	for i, src := range ex.Perm {
		xRow[src] = i
	}
	truth := mat.NewDense(ex.NObs, len(known), nil)
	for j, a := range known {
		col := xRow[a]
		for r, obs := range ex.ObsRows {
			truth.Set(r, j, float64(ex.A[obs*ex.N+col]))
		}
	}
	var diff mat.Dense
	diff.Sub(ak, truth)
	return mat.Norm(&diff, 2) / mat.Norm(truth, 2)
}
