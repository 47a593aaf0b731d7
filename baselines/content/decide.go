package content

import (
	"fmt"
	"math"
	"slices"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/membership"
)

// Verdicts of the attack on one victim, decided without knowing the secret.
const (
	// VerdictClaim: below full rank, one candidate passes the residual test, leads the rest by
	// the claim gap, and every other candidate and every neighbour of it (CheckNeighbours) fails
	// the test; for a decoder, so does the row of every next token after its text (CheckEnd).
	VerdictClaim = "claim"
	// VerdictAbsent: no candidate passes an absolute test that the secret's rows are guaranteed
	// to pass (recomputation error allowed for): the secret is not among the candidates.
	VerdictAbsent = "not among the candidates"
	// VerdictRanked: the ranking puts a candidate first (Decision.Best) but nothing can be proven:
	// it passes no test that an absent candidate (a prefix or near-duplicate of the secret)
	// could not pass too, or its lead is short, or the tests that could prove absence do not
	// hold for this observation (rows dropped, directions lost to rounding).
	VerdictRanked = "ranked first, not claimed"
)

// MeasureScores are every candidate's membership scores over its secret rows (the worst row
// decides, as SlotWorst): log10 leverage, and log10 outside fraction of the top-k directions for
// each k of the space's Ks.
type MeasureScores struct {
	Leverage []float64
	TopK     [][]float64
	// LeverageExcess is, per candidate, log10 of the largest ratio of a secret row's leverage to
	// that row's own bound (membership.Space.RowLeverageBound): > 0 means some row of the
	// candidate cannot be a row of X. nil where no leverage bound holds.
	LeverageExcess []float64
}

// Measure scores every candidate's secret rows against ms.
func (c *Candidates) Measure(ms *membership.Space) (*MeasureScores, error) {
	ks := ms.Ks()
	out := &MeasureScores{Leverage: make([]float64, c.Len()), TopK: make([][]float64, len(ks))}
	if ms.LeverageBound() > 0 {
		out.LeverageExcess = make([]float64, c.Len())
	}
	for j := range out.TopK {
		out.TopK[j] = make([]float64, c.Len())
	}
	slot := func(i int) (int, int) { return c.Slot[i][0], c.Slot[i][1] }
	err := c.eachBlock(false, slot, func(first, last int, block *baselines.PreparedRows) error {
		sc, err := ms.ScoreSpectralPrepared(block)
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
			if out.LeverageExcess != nil {
				ex := math.Inf(-1)
				if w == 0 {
					ex = math.Inf(1)
				}
				for r := at; r < at+w; r++ {
					ex = max(ex, math.Log10(max(sc.Leverage[r], floorFrac)/sc.LeverageBound[r]))
				}
				out.LeverageExcess[i] = ex
			}
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
	// Verdict is VerdictClaim, VerdictAbsent or VerdictRanked; Best the candidate ranked first by
	// Measure ("residual", "leverage" or "topk"; K the top-k of topk).
	Verdict string
	Best    int
	Measure string
	K       int
	// Ranking is the scores the attack ranks by (lower is better), one per candidate.
	Ranking []float64
	// TopK is the top-k scores at the k chosen from the leads (what the "topk" row reports).
	TopK []float64
	// Neighbours is what CheckNeighbours found (zero until it ran on a claim); Withdrawn says a
	// neighbour passed the residual test and the claim became VerdictRanked.
	Neighbours NeighbourReport
	Withdrawn  bool
	// End is what CheckEnd found (nil until it ran on a decoder's claim); EndWithdrawn says a text
	// going on after the claimed one passed too, or the test could not run, and the claim became
	// VerdictRanked.
	End          *EndReport
	EndWithdrawn bool
}

// Decide is the attack's decision, made from the observation and the scores alone. Every bound
// allows for ms's recomputation error (membership.Options.Recompute):
//   - below full rank the residual ranks (residual, the primary score's log10 outside
//     fractions). A claim needs the best candidate's residual within ms.ResidualBound(), a lead
//     of gap decades, and every other candidate beyond the bound: a runner-up within it passes
//     the test the secret is guaranteed to pass, so a lead alone does not prove it is not the
//     secret. The caller must then test the claimed candidate's neighbours, strings that are
//     not candidates (CheckNeighbours). No candidate within the bound proves the secret absent
//     only when every row is observed and no direction of U was lost to rounding
//     (ms.Deficient): with rows dropped or directions lost, a true row need not lie in the
//     retained row space;
//   - at full rank with every row observed the leverage ranks and nothing is claimed: a row of
//     X is within its leverage bound, but so can be rows that are not (near-duplicates and
//     prefixes of the secret, whose rows nearly contain the secret's; strong shields), and no
//     test tells an absent near-duplicate from the secret. On the small MiniLM store at +384
//     shield rows of scale 1 the old rule (best within 1.25, every other beyond 2.5) claimed
//     "1603" for the secret "16037" and "5288" for "5282". Every candidate beyond its own
//     bound (m.LeverageExcess > 0) does prove the secret absent;
//   - at full rank with rows dropped no absolute test holds: the top-k ranking (at the k whose
//     best candidate leads most) ranks.
//
// Where a candidate is ranked first but nothing is proven the verdict is VerdictRanked, never
// VerdictAbsent: an absolute test that the secret could have failed (a recomputed row is never
// bit-equal to the deployer's) must not read as "safe".
func Decide(ms *membership.Space, residual []float64, m *MeasureScores, gap float64) Decision {
	kBest, kLead := 0, math.Inf(-1)
	for j := range m.TopK {
		if _, g := membership.Lead(m.TopK[j]); g > kLead {
			kBest, kLead = j, g
		}
	}
	dec := Decision{Verdict: VerdictRanked, TopK: m.TopK[kBest]}
	if !ms.FullRank() {
		best, g := membership.Lead(residual)
		dec.Best, dec.Measure, dec.Ranking = best, membership.Residual.String(), residual
		switch {
		case residual[best] <= math.Log10(ms.ResidualBound()):
			if g >= gap && residual[best]+g > math.Log10(ms.ResidualBound()) {
				dec.Verdict = VerdictClaim
			}
		case ms.AllObserved() && !ms.Deficient():
			dec.Verdict = VerdictAbsent
		}
		return dec
	}
	// Past full rank the leverage ranks when every row is observed (its bound holds), else the
	// top-k ranking at the k whose best candidate leads most. Choosing between them by the lead
	// was tried and is wrong: on the real 20k MiniLM store at +384 shield rows of scale 3, top-k's
	// best led by decades and was never the secret (recovery 0.00) while leverage ranked 0.65.
	if ms.LeverageBound() == 0 {
		tBest, _ := membership.Lead(m.TopK[kBest])
		dec.Best, dec.Measure, dec.K, dec.Ranking = tBest, membership.TopK.String(), ms.Ks()[kBest], m.TopK[kBest]
		return dec
	}
	dec.Best, _ = membership.Lead(m.Leverage)
	dec.Measure, dec.Ranking = membership.Leverage.String(), m.Leverage
	if slices.Min(m.LeverageExcess) > 0 {
		dec.Verdict = VerdictAbsent
	}
	return dec
}
