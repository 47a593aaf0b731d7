package baselines

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/splitpool"
	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

// Row-space retrieval over sampled examples (SPEC §7): the driver behind `baseline -attack rowspace`.

// RowSpaceOptions configures row-space retrieval over sampled examples.
type RowSpaceOptions struct {
	// Split is the split examples and candidates come from.
	Split data.Split
	// Examples is the number of examples, indices 0..Examples-1 of the split's stream (0: 16).
	Examples int
	// Batch is the number of consecutive examples whose positives together form the candidate set,
	// as in-batch candidates do in training (SPEC §5) (0: 4).
	Batch int
	// ExtraNegatives adds this many random texts of the split to every candidate set.
	ExtraNegatives int
	// Aggregate turns a candidate's row residuals into its score.
	Aggregate Aggregate
	// RankTol is NewRowSpace's relative singular-value cut-off (0: DefaultRankTol).
	RankTol float64
	// Seed seeds the extra negatives.
	Seed uint64
	// Candidates is where the candidate texts' rows come from: the attacker's own recomputation
	// of every text, indexed as the sampler's corpus (nil: the sampler's corpus, whose rows are
	// then bit-equal to the rows mixed). It differs from the sampler's corpus when an external
	// deployer computed the mixed rows.
	Candidates data.Corpus
	// Absence, when not nil, is the absolute test the presence claims rest on: a candidate text
	// is proven absent from an example when no set of rows the sampler could have taken from it
	// passes (ProvenAbsent). nil: ranking only.
	Absence AbsenceTest
}

// AbsenceTest prepares the absolute test of one example from its observation uObs (n_obs, d):
// the returned RowTest says, per row of a candidate text, whether it passes a test that every
// row of the example's X is guaranteed to pass (within the recomputation error between the
// attacker's rows and the rows mixed). A row that fails is not a row of X.
type AbsenceTest func(ex *gelo.Example, uObs *mat.Dense) (RowTest, error)

// RowTest reports, for each row of rows (t, d), whether it passes the example's absolute test.
type RowTest func(rows *mat.Dense) ([]bool, error)

// ProvenAbsent says whether a text whose rows passed the absolute test as pass says cannot be a
// positive of the example: the sampler takes take = min(tokens_per_text, rows) of a positive's
// rows, contiguous (window) or any distinct ones (random), and every row it takes is a row of X
// and passes. So the text is absent when no window of take consecutive rows passes (window), or
// fewer than take rows pass (random). Rows of the text outside the sampled ones need not pass:
// scoring a text by all its rows would call a present text absent.
func ProvenAbsent(pass []bool, take int, window bool) bool {
	if take < 1 || take > len(pass) {
		return false // no rows to sample, or a text the sampler could not have taken: no proof
	}
	if !window {
		n := 0
		for _, p := range pass {
			if p {
				n++
			}
		}
		return n < take
	}
	run := 0
	for _, p := range pass {
		if !p {
			run = 0
			continue
		}
		if run++; run >= take {
			return false
		}
	}
	return true
}

// AbsenceCounts counts the presence claims (proofs of absence) over the examples' candidates.
type AbsenceCounts struct {
	// Decoys is the (example, candidate) pairs whose text is not one of the example's positives;
	// DecoysProven those proven absent (right claims).
	Decoys       int `json:"decoys"`
	DecoysProven int `json:"decoys_proven_absent"`
	// Positives is the (example, positive) pairs; PositivesProven those proven absent: wrong
	// claims, which a sound test never makes.
	Positives       int `json:"positives"`
	PositivesProven int `json:"positives_proven_absent"`
	// Void is the examples where no proof can hold (centred rows: the mixed rows are not the
	// texts' rows), skipped.
	Void int `json:"void_examples,omitempty"`
}

func (o *RowSpaceOptions) defaults() error {
	if o.Examples == 0 {
		o.Examples = 16
	}
	if o.Batch == 0 {
		o.Batch = 4
	}
	if o.Examples < 1 || o.Batch < 1 || o.ExtraNegatives < 0 {
		return fmt.Errorf("baselines: row-space options: examples %d, batch %d, extra negatives %d: want positive counts",
			o.Examples, o.Batch, o.ExtraNegatives)
	}
	return nil
}

// RowSpaceRow is row-space retrieval over one sampler configuration.
type RowSpaceRow struct {
	// ObsRows and ObserveDtype are the sampler's observation settings.
	ObsRows      float64           `json:"obs_rows"`
	ObserveDtype gelo.ObserveDtype `json:"observe_dtype"`
	// Aggregate and Split name the scoring and the split.
	Aggregate string `json:"aggregate"`
	Split     string `json:"split"`
	// Candidates is the mean candidate-set size.
	Candidates float64 `json:"candidates"`
	// Mass, Top1 and Recall are the retrieval figures with their chance levels.
	Mass   eval.Metric `json:"mass"`
	Top1   eval.Metric `json:"top1"`
	Recall eval.Metric `json:"recall"`
	// SourceResidual is the median over (example, positive text) of the smallest fraction of a
	// source row's energy outside rowspace(U_obs): ~1e-13 when exact, 1e-5 after bf16.
	SourceResidual float64 `json:"source_residual"`
	// Absence counts the proofs of absence (RowSpaceOptions.Absence); nil without the test.
	Absence *AbsenceCounts `json:"absence,omitempty"`
}

// RowSpaceRetrieval scores every example's candidate texts (all their token rows, as the attacker
// would compute them by running the open model on each candidate) by containment in
// rowspace(U_obs) and returns the retrieval metrics. With the sampler's center: true the secret
// per-example mean breaks exact containment; the figures then measure that.
func RowSpaceRetrieval(ctx context.Context, s *gelo.Sampler, opts RowSpaceOptions) (RowSpaceRow, error) {
	if err := opts.defaults(); err != nil {
		return RowSpaceRow{}, err
	}
	cfg := s.Config()
	row := RowSpaceRow{ObsRows: cfg.ObsRows, ObserveDtype: cfg.ObserveDtype, Aggregate: opts.Aggregate.String(), Split: opts.Split.String()}
	corpus := s.Corpus()
	if opts.Candidates != nil {
		if opts.Candidates.NumTexts() != corpus.NumTexts() || opts.Candidates.D() != corpus.D() {
			return RowSpaceRow{}, fmt.Errorf("baselines: candidate rows of %d texts of width %d against a sampler corpus of %d texts of width %d",
				opts.Candidates.NumTexts(), opts.Candidates.D(), corpus.NumTexts(), corpus.D())
		}
		corpus = opts.Candidates
	}
	if opts.Absence != nil {
		row.Absence = &AbsenceCounts{}
	}
	texts := s.Texts(opts.Split)
	var acc eval.RetrievalAccumulator
	var sourceRes []float64
	candTotal := 0
	for first := 0; first < opts.Examples; first += opts.Batch {
		var exs []*gelo.Example
		for i := first; i < min(first+opts.Batch, opts.Examples); i++ {
			if err := ctx.Err(); err != nil {
				return RowSpaceRow{}, err
			}
			ex, err := s.Example(opts.Split, int64(i))
			if err != nil {
				return RowSpaceRow{}, err
			}
			exs = append(exs, ex)
		}
		pool, positives, err := candidatePool(exs, texts, opts.ExtraNegatives, opts.Seed, first)
		if err != nil {
			return RowSpaceRow{}, err
		}
		cands := make([]*mat.Dense, len(pool))
		for c, ti := range pool {
			var err error
			if cands[c], err = textRows(corpus, ti); err != nil {
				return RowSpaceRow{}, err
			}
		}
		for i, ex := range exs {
			if err := ctx.Err(); err != nil {
				return RowSpaceRow{}, err
			}
			u, err := eval.FromFloat32(ex.NObs, ex.D, ex.UObs)
			if err != nil {
				return RowSpaceRow{}, err
			}
			rs, err := NewRowSpace(u, opts.RankTol)
			if err != nil {
				return RowSpaceRow{}, fmt.Errorf("example %d: %w", ex.Index, err)
			}
			logits := make([]float64, len(pool))
			best := make([]float64, len(pool))
			for c, rows := range cands {
				frac, energy, err := rs.Residuals(rows)
				if err != nil {
					return RowSpaceRow{}, err
				}
				sc, err := aggregate(frac, energy, opts.Aggregate)
				if err != nil {
					return RowSpaceRow{}, err
				}
				logits[c] = sc.Logit
				best[c] = slices.Min(frac)
			}
			pos := positives[i]
			for _, c := range pos {
				sourceRes = append(sourceRes, best[c])
			}
			if row.Absence != nil {
				if err := countAbsence(row.Absence, opts.Absence, ex, u, cands, pos, cfg); err != nil {
					return RowSpaceRow{}, fmt.Errorf("example %d: %w", ex.Index, err)
				}
			}
			r, err := eval.ScoreRetrieval(logits, pos)
			if err != nil {
				return RowSpaceRow{}, fmt.Errorf("example %d: %w", ex.Index, err)
			}
			acc.AddScore(r)
			candTotal += len(pool)
		}
	}
	res := acc.Result()
	row.Mass, row.Top1, row.Recall = res.Mass, res.Top1, res.Recall
	row.Candidates = float64(candTotal) / float64(opts.Examples)
	row.SourceResidual = eval.Percentile(sourceRes, 0.5)
	return row, nil
}

// countAbsence runs the absolute test of example ex (observation u) on every candidate's rows and
// adds its proofs of absence to counts; positives are the candidates that are ex's positives.
func countAbsence(counts *AbsenceCounts, test AbsenceTest, ex *gelo.Example, u *mat.Dense, cands []*mat.Dense, positives []int, cfg gelo.Config) error {
	if cfg.Center {
		counts.Void++
		return nil
	}
	rt, err := test(ex, u)
	if err != nil {
		return err
	}
	for c, rows := range cands {
		pass, err := rt(rows)
		if err != nil {
			return fmt.Errorf("candidate %d: %w", c, err)
		}
		absent := ProvenAbsent(pass, min(ex.TokensPerText, len(pass)), cfg.TokenSampling == gelo.TokenWindow)
		if slices.Contains(positives, c) {
			counts.Positives++
			if absent {
				counts.PositivesProven++
			}
			continue
		}
		counts.Decoys++
		if absent {
			counts.DecoysProven++
		}
	}
	return nil
}

// candidatePool returns the candidate texts of a batch (corpus indices, splitpool.Candidates: the
// positives in order of first appearance, then extra negatives drawn by splitpool.ExtraTexts from
// a stream keyed by (seed, first example)) and each example's positive candidates.
func candidatePool(exs []*gelo.Example, texts []int, extra int, seed uint64, first int) ([]int, [][]int, error) {
	positives := make([][]int, len(exs))
	var all []int
	for i, ex := range exs {
		positives[i] = ex.PositiveIdx
		all = append(all, ex.PositiveIdx...)
	}
	var extras []int
	if extra > 0 {
		extras = splitpool.ExtraTexts(rand.New(rand.NewPCG(seed, uint64(first))), texts, all, extra)
	}
	cands, pos, err := splitpool.Candidates(positives, extras)
	if err != nil {
		return nil, nil, fmt.Errorf("baselines: candidates of examples %d..%d: %w", first, first+len(exs)-1, err)
	}
	return cands, pos, nil
}

// textRows reads every row of corpus text ti as a float64 matrix (NumTokens, D).
func textRows(c data.Corpus, ti int) (*mat.Dense, error) {
	n, d := c.NumTokens(ti), c.D()
	buf := make([]float32, n*d)
	if err := c.Rows(ti, 0, n, buf); err != nil {
		return nil, fmt.Errorf("baselines: reading candidate text %d: %w", c.TextID(ti), err)
	}
	return eval.FromFloat32(n, d, buf)
}

// RowSpaceTable runs RowSpaceRetrieval for every observation setting: obsRows (nil: 1, 0.96, 0.8)
// crossed with dtypes (nil: none, i.e. fp32, and bf16), each on s's corpus and configuration with
// only obs_rows and observe_dtype replaced. The sampler draws H and A from per-stage streams, so
// every cell sees the same texts, windows and mixing matrices.
func RowSpaceTable(ctx context.Context, s *gelo.Sampler, obsRows []float64, dtypes []gelo.ObserveDtype, opts RowSpaceOptions) ([]RowSpaceRow, error) {
	if obsRows == nil {
		obsRows = []float64{1, 0.96, 0.8}
	}
	if dtypes == nil {
		dtypes = []gelo.ObserveDtype{gelo.ObserveNone, gelo.ObserveBF16}
	}
	var out []RowSpaceRow
	for _, dt := range dtypes {
		for _, obs := range obsRows {
			cfg := s.Config()
			cfg.ObsRows, cfg.ObserveDtype = obs, dt
			cs, err := gelo.NewSampler(s.Corpus(), cfg)
			if err != nil {
				return nil, fmt.Errorf("baselines: row-space table cell obs_rows %v, %s: %w", obs, dt, err)
			}
			row, err := RowSpaceRetrieval(ctx, cs, opts)
			if err != nil {
				return nil, fmt.Errorf("baselines: row-space table cell obs_rows %v, %s: %w", obs, dt, err)
			}
			out = append(out, row)
		}
	}
	return out, nil
}
