package assess

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/internal/fptol"
)

// presenceAttack asks of a candidate text "was it in this batch?", training-free: the attacker
// computes the candidate's rows at every scored block (it has the weights) and tests each against
// that block's U (proof.go: residual below full rank, leverage past it, each against a bound every
// row of X provably meets, the deployer's recomputation error and U's rounding included). A row
// above the bound is not a row of X, so a text with one such row at any scored block is proven
// absent: that exclusion is the attack's only claim. A text whose rows all pass is not claimed
// present: passing is necessary for membership, not proof of it (past full rank, or with strong
// shields, an absent text passes too). Each prompt is scored beside a decoy, a text absent from
// the batch (a filler): the attack tells them apart when the decoy is proven absent and the prompt
// is not excluded; a prompt excluded would be a wrong claim (the bound makes it impossible, and
// the tests check it); where neither is excluded it cannot tell.
type presenceAttack struct{}

func (presenceAttack) Name() string      { return "presence" }
func (presenceAttack) Success() string   { return "tells prompts from decoys (decoy proven absent)" }
func (presenceAttack) Claimed() string   { return "decoys proven absent" }
func (presenceAttack) Undecided() string { return "cannot tell" }

func (presenceAttack) Budget(d Deployment) string {
	return fmt.Sprintf("blocks scored %s; each candidate's rows by one forward pass; a text is proven absent when one of its rows exceeds the bound every row of X meets (residual below full rank, leverage past it; with the deployer's recomputation error, A's and U's rounding); presence is never claimed; one decoy per prompt",
		joinInts(d.Attacker.Blocks))
}

// Check: the proofs need every row of U observed (with rows dropped a row of X can lie outside
// the observed row space, and the leverage bound fails).
func (presenceAttack) Check(d Deployment) error {
	if d.Observe.Rows < 1 {
		return fmt.Errorf("its proofs of absence need every row of U observed (observe.rows %v)", d.Observe.Rows)
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
	b, err := drawBatch(ctx, env, u, blocks)
	if err != nil {
		return nil, err
	}
	stats := BatchStats{Texts: len(u.Prompts), Blocks: slices.Clone(blocks)}
	proofs := map[int]*absence{}
	for k, l := range blocks {
		ex := b.examples[l]
		rho, err := fptol.Recompute(u.Setting.DeployerPrecision, l, t.D)
		if err != nil {
			return nil, err
		}
		pr, err := newAbsence(dense(ex.UObs, ex.NObs, t.D), u.Setting.ObserveDType, ex.N, ex.Kappa, rho)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		proofs[l] = pr
		stats.Rank = append(stats.Rank, pr.rank())
		if k == 0 {
			stats.Clean, stats.Shields, stats.Observed = ex.NClean, ex.K, ex.NObs
		}
		if env.Log != nil {
			env.Log(fmt.Sprintf("presence: block %d: U %d x %d, rank %d, ||U_obs - A X|| <= %.3g", l, ex.NObs, t.D, pr.rank(), pr.errNorm))
		}
	}
	// excess is a text's largest row-to-bound ratio over the scored blocks (> 1: proven absent).
	excess := func(id int64) (float64, error) {
		worst := 0.0
		for _, l := range blocks {
			x, err := proofs[l].excess(b.rows[id][l], t.D)
			if err != nil {
				return 0, err
			}
			worst = max(worst, x)
		}
		return worst, nil
	}
	rows := make([]Row, len(u.Prompts))
	for i, p := range u.Prompts {
		decoy, err := decoyFor(t, u.Prompts, i)
		if err != nil {
			return nil, err
		}
		px, err := excess(p.ID)
		if err != nil {
			return nil, err
		}
		dx, err := excess(decoy.ID)
		if err != nil {
			return nil, err
		}
		promptOut, decoyOut := px > 1, dx > 1
		rows[i] = baseRow(env, u, i, p, BatchStats{})
		rows[i].Claimed = decoyOut
		rows[i].Success = decoyOut && !promptOut
		rows[i].CannotTell = !decoyOut && !promptOut
		rows[i].DecoyID = ptr(decoy.ID)
		rows[i].PromptExcess, rows[i].DecoyExcess = rounded(px), rounded(dx)
		if promptOut {
			rows[i].WrongClaims = 1 // every prompt is in the batch: excluding one is wrong
		}
		if promptOut {
			stats.Claims++
		}
		if decoyOut {
			stats.Claims++
			stats.ClaimsRight++
		}
	}
	// One forward pass per text of the corpus (prompts and fillers).
	stats.Passes = len(b.texts)
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

// dense copies float32 rows (n, d) into a float64 matrix.
func dense(x []float32, n, d int) *mat.Dense {
	out := mat.NewDense(n, d, nil)
	raw := out.RawMatrix().Data
	for i, v := range x[:n*d] {
		raw[i] = float64(v)
	}
	return out
}
