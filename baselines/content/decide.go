package content

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
)

// Verdicts of the attack on one victim, decided without knowing the secret.
const (
	// VerdictClaim: one candidate is certified contained and leads the rest.
	VerdictClaim = "claim"
	// VerdictAbsent: no candidate passes the absolute test: the secret is not among them.
	VerdictAbsent = "not among the candidates"
	// VerdictNone: some candidate passes the absolute test, but none stands out (or no absolute
	// test holds for this observation, e.g. rows dropped past full rank).
	VerdictNone = "no claim"
)

// LeverageRunnerUp is how far above the leverage bound the runner-up must lie for a leverage
// claim: a row of X has leverage at most the bound, so one certified candidate among candidates
// that are all at least twice the bound is the only one that can be a row of X.
const LeverageRunnerUp = 2

// MeasureScores are every candidate's membership scores over its secret rows (the worst row
// decides, as SlotWorst): log10 leverage, and log10 outside fraction of the top-k directions for
// each k of the space's Ks.
type MeasureScores struct {
	Leverage []float64
	TopK     [][]float64
}

// Measure scores every candidate's secret rows against ms.
func (c *Candidates) Measure(ms *membership.Space) (*MeasureScores, error) {
	ks := ms.Ks()
	out := &MeasureScores{Leverage: make([]float64, c.Len()), TopK: make([][]float64, len(ks))}
	for j := range out.TopK {
		out.TopK[j] = make([]float64, c.Len())
	}
	slot := func(i int) (int, int) { return c.Slot[i][0], c.Slot[i][1] }
	err := c.eachBlock(slot, func(first, last int, block *mat.Dense) error {
		sc, err := ms.ScoreSpectral(block)
		if err != nil {
			return fmt.Errorf("content: candidates %d..%d: %w", first, last-1, err)
		}
		at := 0
		for i := first; i < last; i++ {
			w := c.Slot[i][1] - c.Slot[i][0]
			lev := math.Inf(-1)
			if w == 0 {
				lev = math.Inf(1) // nothing to test: never certified
			}
			for _, l := range sc.Leverage[at : at+w] {
				lev = max(lev, l)
			}
			out.Leverage[i] = math.Log10(max(lev, floorFrac))
			for j := range ks {
				out.TopK[j][i] = math.Log10(max(worst(sc.TopK[j][at:at+w]), floorFrac))
			}
			at += w
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScoreResidual is ScoreAll against ms's row space, or, at full rank, every candidate tied at the
// floor: rowspace(U_obs) is all of R^d, every row of every candidate is contained and its
// residual pure round-off, so scoring them would only rank noise (and cost seconds a victim);
// the caller breaks the tie at random, which puts the residual at chance.
func (c *Candidates) ScoreResidual(ms *membership.Space, kinds []Score) ([][]float64, error) {
	if !ms.FullRank() {
		return c.ScoreAll(ms.RowSpace(), kinds)
	}
	scores := make([][]float64, len(kinds))
	for k := range scores {
		scores[k] = make([]float64, c.Len())
		for i := range scores[k] {
			scores[k][i] = math.Log10(floorFrac)
		}
	}
	return scores, nil
}

// Decision is the attack's verdict on one victim and the ranking it rests on.
type Decision struct {
	// Verdict is VerdictClaim, VerdictAbsent or VerdictNone; Best the candidate ranked first by
	// Measure ("residual", "leverage" or "topk"; K the top-k of topk).
	Verdict string
	Best    int
	Measure string
	K       int
	// Ranking is the scores the attack ranks by (lower is better), one per candidate.
	Ranking []float64
	// TopK is the top-k scores at the k chosen from the leads (what the "topk" row reports).
	TopK []float64
}

// Decide is the attack's decision, made from the observation and the scores alone:
//   - below full rank the residual ranks (residual, the primary score's log10 outside fractions);
//     a claim needs the best candidate's residual within ms.ResidualBound() (the absolute test)
//     and a lead of gap decades; no certified candidate means the secret is not among them when
//     every row is observed (with rows dropped, a true row need not be contained: no verdict);
//   - at full rank with every row observed the leverage ranks; a claim needs its best candidate
//     within ms.LeverageBound() and every other candidate beyond LeverageRunnerUp times it, and
//     no candidate within the bound means the secret is not among them;
//   - at full rank with rows dropped no absolute test holds: the top-k ranking (at the k whose
//     best candidate leads most) ranks and nothing is claimed.
//
// The top-k ranking never claims, even where it ranks the secret first: it has no absolute test,
// and the leverage bound does not stand in for one (strong shields put every candidate within
// it; measured on the small MiniLM store with +384 shield rows at scale 10, a top-k claim
// backed by the leverage bound was wrong).
func Decide(ms *membership.Space, residual []float64, m *MeasureScores, gap float64) Decision {
	kBest, kLead := 0, math.Inf(-1)
	for j := range m.TopK {
		if _, g := membership.Lead(m.TopK[j]); g > kLead {
			kBest, kLead = j, g
		}
	}
	dec := Decision{Verdict: VerdictNone, TopK: m.TopK[kBest]}
	if !ms.FullRank() {
		best, g := membership.Lead(residual)
		dec.Best, dec.Measure, dec.Ranking = best, membership.Residual.String(), residual
		switch {
		case !(residual[best] <= math.Log10(ms.ResidualBound())):
			if ms.AllObserved() {
				dec.Verdict = VerdictAbsent
			} // with rows dropped the secret's own rows may lie outside: no verdict
		case g >= gap:
			dec.Verdict = VerdictClaim
		}
		return dec
	}
	// Past full rank the leverage ranks when every row is observed (its bound holds), else the
	// top-k ranking at the k whose best candidate leads most. Choosing between them by the lead
	// was tried and is wrong: on the real 20k MiniLM store at +384 shield rows of scale 3, top-k's
	// best led by decades and was never the secret (recovery 0.00) while leverage ranked 0.65.
	lBest, lLead := membership.Lead(m.Leverage)
	bound := ms.LeverageBound()
	if bound == 0 {
		tBest, _ := membership.Lead(m.TopK[kBest])
		dec.Best, dec.Measure, dec.K, dec.Ranking = tBest, membership.TopK.String(), ms.Ks()[kBest], m.TopK[kBest]
		return dec // rows dropped: no absolute test, no claim
	}
	dec.Best, dec.Measure, dec.Ranking = lBest, membership.Leverage.String(), m.Leverage
	logBound := math.Log10(bound)
	switch {
	case !(m.Leverage[lBest] <= logBound):
		dec.Verdict = VerdictAbsent
	case m.Leverage[lBest]+lLead > logBound+math.Log10(LeverageRunnerUp):
		dec.Verdict, dec.Best, dec.Measure, dec.K, dec.Ranking = VerdictClaim, lBest, membership.Leverage.String(), 0, m.Leverage
	}
	return dec
}
