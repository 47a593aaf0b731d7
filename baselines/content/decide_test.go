package content

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/baselines/membership/membershiptest"
)

// decideCase builds an observation of w and 31 candidates of 3 rows each whose last 2 rows are the
// secret slot: candidate 7 holds two rows of X (unless absent), the others fresh rows of the same
// distribution, and returns Decide's verdict.
func decideCase(t *testing.T, seed uint64, w membershiptest.World, allObserved, absent bool) (Decision, *membership.Space) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	dr := w.Draw(rng)
	u := 0x1p-24
	if w.Bits > 0 {
		u = math.Ldexp(1, -w.Bits)
	}
	ms, err := membership.New(dr.U, membership.Options{UnitRoundoff: u, AllObserved: allObserved, RankTol: membership.RankTol(dr.U, u)})
	if err != nil {
		t.Fatal(err)
	}
	const secret = 7
	var blocks []*mat.Dense
	var slots [][2]int
	for i := 0; i < 31; i++ {
		b := w.Rows(rng, dr.Common, 3)
		if i == secret && !absent {
			b.Slice(1, 3, 0, w.D).(*mat.Dense).Copy(dr.X.Slice(5, 7, 0, w.D))
		}
		blocks = append(blocks, b)
		slots = append(slots, [2]int{1, 3})
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
	return Decide(ms, rs[0], m, 1), ms
}

func TestDecideClaimsOnlyWhatItCanProve(t *testing.T) {
	world := func(m int, scale float64, bits int) membershiptest.World {
		return membershiptest.World{N: 40, D: 96, K0: 8, M: m, Eps: 0.3, Scale: scale, Kappa: 1, Bits: bits}
	}
	for _, tc := range []struct {
		name        string
		w           membershiptest.World
		allObserved bool
		absent      bool
		verdict     string
		measure     string // "" where the ranking may be leverage or top-k
	}{
		{"below full rank, bf16", world(0, 1, 8), true, false, VerdictClaim, "residual"},
		{"below full rank, fp16, shields", world(20, 1, 11), true, false, VerdictClaim, "residual"},
		{"past full rank, weak shields, fp16", world(96, 0.1, 11), true, false, VerdictClaim, "leverage"},
		{"past full rank, strong shields, bf16", world(96, 10, 8), true, false, VerdictNone, ""},
		{"secret absent, below full rank", world(0, 1, 8), true, true, VerdictAbsent, "residual"},
		{"secret absent, past full rank, weak shields", world(96, 0.1, 11), true, true, VerdictAbsent, ""},
		{"rows dropped past full rank", world(96, 0.1, 11), false, false, VerdictNone, ""},
		{"secret absent, rows dropped, below full rank", world(0, 1, 8), false, true, VerdictNone, "residual"},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			dec, ms := decideCase(t, seed, tc.w, tc.allObserved, tc.absent)
			if dec.Verdict != tc.verdict || (tc.measure != "" && dec.Measure != tc.measure) {
				t.Errorf("%s (seed %d, rank %d of %d): verdict %q by %s (best %d), want %q by %s",
					tc.name, seed, ms.Rank(), ms.D(), dec.Verdict, dec.Measure, dec.Best, tc.verdict, tc.measure)
			}
			if dec.Verdict == VerdictClaim && (tc.absent || dec.Best != 7) {
				t.Errorf("%s (seed %d): a wrong claim of candidate %d", tc.name, seed, dec.Best)
			}
		}
	}
}
