package content

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/baselines/membership/membershiptest"
)

var digits = []rune("0123456789")

// The neighbours of a PIN: its prefixes first (longest first), then its appends, deletions,
// substitutions and inserts; each once, never the PIN itself nor an empty string.
func TestNeighboursOfAPIN(t *testing.T) {
	got := NeighbourSpec{Alphabet: digits}.Of("0475")
	if want := []string{"047", "04", "0", "04750", "04751"}; !slices.Equal(got[:5], want) {
		t.Fatalf("first neighbours %q, want %q", got[:5], want)
	}
	for _, w := range []string{"04755", "475", "075", "045", "1475", "0485", "0479", "90475", "04975"} {
		if !slices.Contains(got, w) {
			t.Errorf("neighbours of 0475 lack %q", w)
		}
	}
	seen := map[string]bool{}
	for _, v := range got {
		if v == "0475" || v == "" || seen[v] {
			t.Errorf("neighbour %q: the value itself, empty or repeated", v)
		}
		seen[v] = true
	}
	// 3 prefixes, 10 appends, 4 deletions (one of them a prefix), 36 substitutions, 50 inserts
	// less those equal to an append or to each other (an insert beside an equal character).
	if len(got) != 3+10+3+36+(50-10-4) {
		t.Errorf("%d neighbours of 0475, want %d", len(got), 3+10+3+36+36)
	}
}

// The budget caps the neighbours (prefixes and appends first), Exclude leaves the scored
// candidates out, and Key merges values the model reads alike.
func TestNeighboursHonourBudgetExcludeAndKey(t *testing.T) {
	if got := (NeighbourSpec{Alphabet: digits, Budget: 5}).Of("0475"); !slices.Equal(got, []string{"047", "04", "0", "04750", "04751"}) {
		t.Errorf("budget 5: %q", got)
	}
	pins := map[string]bool{}
	for _, p := range PINs() {
		pins[p] = true
	}
	got := NeighbourSpec{Alphabet: digits, Exclude: func(k string) bool { return pins[k] }}.Of("0475")
	for _, v := range got {
		if len(v) == 4 {
			t.Errorf("%q is a candidate PIN, not a neighbour", v)
		}
	}
	lower := NeighbourSpec{Alphabet: []rune("Simth"), Key: strings.ToLower}.Of("Smith")
	for _, v := range lower {
		if strings.ToLower(v) == "smith" {
			t.Errorf("%q reads as the claimed Smith", v)
		}
	}
	if slices.Contains(lower, "Smit") == slices.Contains(lower, "smit") {
		t.Errorf("Smit and smit, one key: want exactly one of them in %q", lower)
	}
	if got := (NeighbourSpec{Alphabet: []rune(" ,5aM")}).Of("March 5"); slices.ContainsFunc(got, func(v string) bool {
		return !wellFormed(v)
	}) {
		t.Errorf("neighbours with edge or doubled white space: %q", got)
	}
	// A date's neighbourhood exceeds the budget: it still reaches every position, with its
	// own class (a digit for a digit) first.
	dates, err := Dates(1925, 2024)
	if err != nil {
		t.Fatal(err)
	}
	got = NeighbourSpec{Alphabet: Alphabet(dates)}.Of("March 5, 1987")
	if len(got) != DefaultNeighbourBudget {
		t.Fatalf("%d neighbours of a date, want the budget %d", len(got), DefaultNeighbourBudget)
	}
	for _, w := range []string{"March 5, 198", "March 5, 19870", "Marc 5, 1987", "Narch 5, 1987", "March 6, 1987", "March 5, 1988", "March 5, 1977", "March 5, 2987"} {
		if !slices.Contains(got, w) {
			t.Errorf("the date's neighbours lack %q", w)
		}
	}
	if a := Alphabet([]string{"0475", "91"}); string(a) != "014579" {
		t.Errorf("alphabet %q", string(a))
	}
}

// neighbourWorld is a world whose wrong rows lie far outside the row space (eps 1), so that the
// candidates and neighbours that hold no row of X fail the residual test even at the bf16
// deployer's bound, and what decides is the near-duplicate.
func neighbourWorld(bits int) membershiptest.World {
	return membershiptest.World{N: 40, D: 96, K0: 8, M: 0, Eps: 1, Scale: 1, Kappa: 1, Bits: bits}
}

// neighbourCase draws an observation of w holding a secret in rows 5 and 6 of X, and 12
// candidates of 3 rows (slot rows 1 and 2): with prefix, candidate 8 is a prefix of the secret,
// its one slot row row 5 of X recomputed within rho ("1603" for the secret "16037"); the secret
// is candidate 7 unless absent. It returns Decide's decision, the space and, as the neighbours
// of the best candidate, 9 strings of fresh rows and, when the secret is absent, the secret's
// own rows recomputed within rho (what an append of "1603" embeds, "16037").
func neighbourCase(t *testing.T, seed uint64, w membershiptest.World, rho float64, absent, prefix bool) (Decision, *membership.Space, *Candidates) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 36))
	dr := w.Draw(rng)
	u := 0x1p-24
	if w.Bits > 0 {
		u = math.Ldexp(1, -w.Bits)
	}
	ms, err := membership.New(dr.U, membership.Options{UnitRoundoff: u, AllObserved: true, RankTol: membership.RankTol(dr.U, u), Recompute: rho})
	if err != nil {
		t.Fatal(err)
	}
	secret := dr.X.Slice(5, 7, 0, w.D)
	var blocks []*mat.Dense
	var slots [][2]int
	for i := 0; i < 12; i++ {
		b := w.Rows(rng, dr.Common, 3)
		switch {
		case i == secretIdx && !absent:
			copyMoved(rng, b.Slice(1, 3, 0, w.D).(*mat.Dense), secret, 0.9*rho)
		case i == 8 && prefix:
			b = b.Slice(0, 2, 0, w.D).(*mat.Dense)
			copyMoved(rng, b.Slice(1, 2, 0, w.D).(*mat.Dense), dr.X.Slice(5, 6, 0, w.D), 0.9*rho)
		}
		r, _ := b.Dims()
		blocks, slots = append(blocks, b), append(slots, [2]int{1, r})
	}
	c := candidatesFrom(blocks, slots)
	rs, err := c.ScoreResidual(ms, []Score{SlotWorst})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Measure(ms)
	if err != nil {
		t.Fatal(err)
	}
	blocks, slots = nil, nil
	for i := 0; i < 9; i++ {
		blocks, slots = append(blocks, w.Rows(rng, dr.Common, 3)), append(slots, [2]int{1, 3})
	}
	if absent {
		b := w.Rows(rng, dr.Common, 3)
		copyMoved(rng, b.Slice(1, 3, 0, w.D).(*mat.Dense), secret, 0.9*rho)
		blocks, slots = append(blocks, b), append(slots, [2]int{1, 3})
	}
	nb := candidatesFrom(blocks, slots)
	nb.Values[len(nb.Values)-1] = "the secret"
	return Decide(ms, rs[0], m, 1), ms, nb
}

// An absent secret whose prefix is a candidate: the prefix's slot row is a row of X, so it passes
// the residual test and leads every other candidate, and Decide alone claims it, in fp32, bf16
// and fp16 observation at every deployer precision's rho. The secret is among the prefix's
// neighbours (an append), passes too, and CheckNeighbours withdraws the claim.
func TestCheckNeighboursWithdrawsTheClaimOfAnAbsentSecretsPrefix(t *testing.T) {
	for _, bits := range []int{0, 8, 11} {
		for _, p := range membership.ComputePrecisions {
			for seed := uint64(1); seed <= 3; seed++ {
				dec, ms, nb := neighbourCase(t, seed, neighbourWorld(bits), rhoFor(t, p), true, true)
				if ms.FullRank() {
					t.Fatalf("bits %d, seed %d: full rank; the test needs rank < d", bits, seed)
				}
				if dec.Verdict != VerdictClaim || dec.Best != 8 {
					t.Fatalf("bits %d, deployer %s, seed %d: Decide's verdict %q of candidate %d; the world must reproduce the wrong claim of the prefix 8",
						bits, p, seed, dec.Verdict, dec.Best)
				}
				got, err := CheckNeighbours(ms, dec, nb, SlotWorst)
				if err != nil {
					t.Fatal(err)
				}
				r := got.Neighbours
				if got.Verdict != VerdictRanked || !got.Withdrawn || r.Tested != nb.Len() || r.Passing != 1 || r.Closest != "the secret" {
					t.Errorf("bits %d, deployer %s, seed %d: verdict %q (withdrawn %v), neighbours %+v; want %q, the secret the one passing",
						bits, p, seed, got.Verdict, got.Withdrawn, r, VerdictRanked)
				}
			}
		}
	}
}

// A present secret whose neighbours hold no row of X keeps its claim, and the report says how
// many neighbours were tested and how far the closest stayed beyond the bound.
func TestCheckNeighboursKeepsAClaimWhoseNeighboursFail(t *testing.T) {
	for _, bits := range []int{0, 8, 11} {
		for _, p := range membership.ComputePrecisions {
			dec, ms, nb := neighbourCase(t, 1, neighbourWorld(bits), rhoFor(t, p), false, false)
			if dec.Verdict != VerdictClaim || dec.Best != secretIdx {
				t.Fatalf("bits %d, deployer %s: Decide's verdict %q of %d, want a claim of the secret %d", bits, p, dec.Verdict, dec.Best, secretIdx)
			}
			got, err := CheckNeighbours(ms, dec, nb, SlotWorst)
			if err != nil {
				t.Fatal(err)
			}
			r := got.Neighbours
			if got.Verdict != VerdictClaim || got.Withdrawn || r.Tested != nb.Len() || r.Passing != 0 || !(r.Score > r.Bound) ||
				r.Bound != math.Log10(ms.ResidualBound()) {
				t.Errorf("bits %d, deployer %s: verdict %q, neighbours %+v; want the claim kept, every neighbour beyond the bound", bits, p, got.Verdict, r)
			}
		}
	}
	// A decision that is no claim is left alone.
	dec, ms, nb := neighbourCase(t, 1, neighbourWorld(0), 0, true, false)
	if got, _ := CheckNeighbours(ms, dec, nb, SlotWorst); got.Verdict != dec.Verdict || got.Neighbours.Tested != 0 {
		t.Errorf("no claim: %+v became %+v", dec.Verdict, got)
	}
}

// A lead of many decades is no proof when the runner-up passes the residual test too: the secret
// is contained bit-equal, candidate 8 holds its rows moved by 1e-5 (residual near 1e-10, far
// within the fp32 bound of 1e-6 but 3 decades behind). Decide ranks; without the runner-up within
// the bound it claims.
func TestDecideNeedsTheRunnerUpRefuted(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 8))
	w := neighbourWorld(0)
	dr := w.Draw(rng)
	ms, err := membership.New(dr.U, membership.Options{UnitRoundoff: 0x1p-24, AllObserved: true, RankTol: membership.RankTol(dr.U, 0x1p-24),
		Recompute: rhoFor(t, membership.PrecisionFP32)})
	if err != nil {
		t.Fatal(err)
	}
	for _, moved := range []float64{1e-5, 1} {
		var blocks []*mat.Dense
		var slots [][2]int
		for i := 0; i < 10; i++ {
			b := w.Rows(rng, dr.Common, 3)
			switch i {
			case secretIdx:
				b.Slice(1, 3, 0, w.D).(*mat.Dense).Copy(dr.X.Slice(5, 7, 0, w.D))
			case 8:
				copyMoved(rng, b.Slice(1, 3, 0, w.D).(*mat.Dense), dr.X.Slice(5, 7, 0, w.D), moved)
			}
			blocks, slots = append(blocks, b), append(slots, [2]int{1, 3})
		}
		c := candidatesFrom(blocks, slots)
		rs, err := c.ScoreResidual(ms, []Score{SlotWorst})
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Measure(ms)
		if err != nil {
			t.Fatal(err)
		}
		bound := math.Log10(ms.ResidualBound())
		dec := Decide(ms, rs[0], m, 1)
		_, lead := membership.Lead(rs[0])
		switch {
		case dec.Best != secretIdx || lead < 1:
			t.Fatalf("moved %g: best %d, lead %.2f decades; the test needs the secret first by >= 1 decade", moved, dec.Best, lead)
		case moved < 1 && (rs[0][8] > bound || dec.Verdict != VerdictRanked):
			t.Errorf("runner-up at 1e%.2f within the bound 1e%.2f: verdict %q, want %q", rs[0][8], bound, dec.Verdict, VerdictRanked)
		case moved == 1 && dec.Verdict != VerdictClaim:
			t.Errorf("runner-up at 1e%.2f beyond the bound 1e%.2f: verdict %q, want a claim", rs[0][8], bound, dec.Verdict)
		}
	}
}
