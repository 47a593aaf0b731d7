package assess

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// presenceAttack asks of a candidate text "was it in this batch?", training-free: the attacker
// computes the candidate's rows at every scored block (it has the weights) and tests each against
// that block's U with baselines/membership's absolute tests (residual below full rank, leverage
// past it; both allow the deployer's recomputation error). A text is said present when every row
// passes at every scored block. Each prompt is scored beside a decoy, a text absent from the
// batch (a filler); a prompt counts as a success when it is said present and its decoy is not.
// Passing is necessary for membership, not proof of it (membership's package comment), so a
// decoy said present is counted as a wrong claim.
type presenceAttack struct{}

func (presenceAttack) Name() string    { return "presence" }
func (presenceAttack) Success() string { return "tells present texts from absent ones" }
func (presenceAttack) Claimed() string { return "said present" }

func (presenceAttack) Budget(d Deployment) string {
	return fmt.Sprintf("blocks scored %s; each candidate's rows by one forward pass; residual test below full rank, leverage past it (absolute tests only); one decoy per prompt",
		joinInts(d.Attacker.Blocks))
}

// Check: the absolute tests need every row of U observed (with rows dropped a true row can lie
// outside the observed row space, and the leverage bound fails).
func (presenceAttack) Check(d Deployment) error {
	if d.Observe.Rows < 1 {
		return fmt.Errorf("its absolute tests need every row of U observed (observe.rows %v)", d.Observe.Rows)
	}
	for _, b := range d.Attacker.Blocks {
		if !slices.Contains(d.Offload.Blocks, b) {
			return fmt.Errorf("the attacker scores block %d, which GELO does not offload (offload.blocks %v)", b, d.Offload.Blocks)
		}
	}
	return nil
}

// Run draws the batch's U at every scored block as decode does (the same sampler, corpus and
// call salts, so the same A and shields) and tests each prompt and its decoy.
func (presenceAttack) Run(ctx context.Context, env *Env, u Unit) ([]Row, error) {
	d, t := env.Deployment, env.Target
	blocks := d.Attacker.Blocks
	upto := slices.Max(blocks) + 1
	texts, ids := batchCorpus(t, u.Prompts)
	rowsOf := make(map[int64][][]float32, len(texts)) // per text id: rows per block < upto
	corpora := make([]*data.MemCorpus, upto)
	for l := range corpora {
		corpora[l] = data.NewMemCorpus(t.D, 1)
	}
	longest := 0
	for i, toks := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := t.Model.Rows(toks, upto)
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", ids[i], err)
		}
		rowsOf[ids[i]] = r
		for _, l := range blocks {
			if err := corpora[l].Add(ids[i], r[l], []float32{0}); err != nil {
				return nil, err
			}
		}
		longest = max(longest, len(toks))
	}
	u0, err := membership.UnitRoundoff(u.Setting.ObserveDType)
	if err != nil {
		return nil, err
	}
	cfg := u.Setting.sampler(u.Seed, d.Prompts.ValFrac, len(u.Prompts))
	cfg.TokensPerText, cfg.TokenSampling = gelo.Fixed(float64(longest)), gelo.TokenWindow
	spaces := map[int]*membership.Space{}
	stats := BatchStats{Texts: len(u.Prompts), Blocks: slices.Clone(blocks)}
	for k, l := range blocks {
		c := cfg
		c.Call = uint64(l) + 1 // decode's salt: the same A and shields as its batch
		s, err := gelo.NewSampler(corpora[l], c)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		ex, err := s.Example(data.Val, 0)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		rho, err := fptol.Recompute(u.Setting.DeployerPrecision, l, t.D)
		if err != nil {
			return nil, err
		}
		uObs := dense(ex.UObs, ex.NObs, t.D)
		sp, err := membership.New(uObs, membership.Options{UnitRoundoff: u0, AllObserved: u.Setting.ObsRows == 1,
			RankTol: membership.RankTol(uObs, u0), Recompute: rho})
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		spaces[l] = sp
		stats.Rank = append(stats.Rank, sp.Rank())
		if k == 0 {
			stats.Clean, stats.Shields, stats.Observed = ex.NClean, ex.K, ex.NObs
		}
		if env.Log != nil {
			env.Log(fmt.Sprintf("presence: block %d: U %d x %d, rank %d", l, ex.NObs, t.D, sp.Rank()))
		}
	}
	said := func(id int64) (bool, error) {
		for _, l := range blocks {
			ok, err := passes(spaces[l], rowsOf[id][l], t.D)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	rows := make([]Row, len(u.Prompts))
	for i, p := range u.Prompts {
		decoy, err := decoyFor(t, u.Prompts, i)
		if err != nil {
			return nil, err
		}
		present, err := said(p.ID)
		if err != nil {
			return nil, err
		}
		decoyPresent, err := said(decoy.ID)
		if err != nil {
			return nil, err
		}
		rows[i] = baseRow(env, u, i, p, BatchStats{})
		rows[i].Claimed = present
		rows[i].Success = present && !decoyPresent
		rows[i].DecoyID = ptr(decoy.ID)
		if decoyPresent {
			rows[i].WrongClaims = 1
		}
	}
	// One forward pass per text of the corpus (prompts and fillers). Every prompt is in the batch,
	// so a claim about one is right; the wrong claims are the decoys said present.
	stats.Passes = len(texts)
	for _, r := range rows {
		if r.Claimed {
			stats.Claims++
		}
	}
	stats.ClaimsRight = stats.Claims
	for i := range rows {
		rows[i].Stats = stats
	}
	return rows, nil
}

// decoyFor is prompt i's decoy: filler i, or the next filler whose tokens are not a text of the
// batch.
func decoyFor(t *Target, batch []Prompt, i int) (Prompt, error) {
	for k := range t.Fillers {
		f := t.Fillers[(i+k)%len(t.Fillers)]
		if !slices.ContainsFunc(batch, func(p Prompt) bool { return slices.Equal(p.Tokens, f.Tokens) }) {
			return f, nil
		}
	}
	return Prompt{}, errors.New("presence: every filler text equals a text of the batch: no decoy")
}

// passes reports whether every row of rows (len/d rows of width d) passes sp's absolute test:
// the residual below full rank, the row's own leverage bound past it. Past full rank without a
// leverage bound (rows dropped) nothing is decided: false.
func passes(sp *membership.Space, rows []float32, d int) (bool, error) {
	sc, err := sp.Score(dense(rows, len(rows)/d, d))
	if err != nil {
		return false, err
	}
	for i := range sc.Energy {
		switch {
		case !sp.FullRank():
			if sc.Residual[i] > sp.ResidualBound() {
				return false, nil
			}
		case sc.LeverageBound != nil:
			if sc.Leverage[i] > sc.LeverageBound[i] {
				return false, nil
			}
		default:
			return false, nil
		}
	}
	return true, nil
}

// dense copies float32 rows (n, d) into a float64 matrix.
func dense(x []float32, n, d int) *mat.Dense {
	out := mat.NewDense(n, d, nil)
	raw := out.RawMatrix().Data
	for i, v := range x[:n*d] {
		raw[i] = float64(v)
	}
	return out
}
