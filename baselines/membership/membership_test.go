package membership

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership/membershiptest"
)

// setting names a world and its observed unit round-off.
type setting struct {
	name string
	w    membershiptest.World
	u    float64
}

// base is 40 rows of width 96 in 8 strong common directions, with an individual part of 30% norm.
func base(m int, scale, kappa float64, bits int) membershiptest.World {
	return membershiptest.World{N: 40, D: 96, K0: 8, M: m, Eps: 0.3, Scale: scale, Kappa: kappa, Bits: bits}
}

func roundoff(bits int) float64 {
	if bits == 0 {
		return 0x1p-24
	}
	return math.Ldexp(1, -bits)
}

func space(t *testing.T, rng *rand.Rand, w membershiptest.World, allObserved bool) (*Space, membershiptest.Drawn) {
	t.Helper()
	dr := w.Draw(rng)
	u := roundoff(w.Bits)
	s, err := New(dr.U, Options{UnitRoundoff: u, AllObserved: allObserved, RankTol: RankTol(dr.U, u)})
	if err != nil {
		t.Fatal(err)
	}
	return s, dr
}

// The bound behind every leverage claim: with every row observed, a row of X has leverage at most
// 1/sigma_min(A)^2 = 1, whatever the shields' kind of strength and whatever kappa, in fp32 and
// bf16. A bound that failed here would make leverage claims wrong.
func TestLeverageOfRowsOfXIsWithinTheBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	skipped, checked := 0, 0
	for _, scale := range []float64{0.1, 1, 10} {
		for _, kappa := range []float64{1, 100} {
			for _, bits := range []int{0, 8} {
				for _, m := range []int{56, 96, 192} {
					w := base(m, scale, kappa, bits)
					s, dr := space(t, rng, w, true)
					if !s.FullRank() {
						// Weak shields in bf16 can sink directions under the rounding floor:
						// then no leverage bound is offered at all.
						if s.LeverageBound() != 0 {
							t.Errorf("%+v: rank %d < d and a leverage bound offered", w, s.Rank())
						}
						skipped++
						continue
					}
					sc, err := s.Score(dr.X)
					if err != nil {
						t.Fatal(err)
					}
					checked++
					for i, l := range sc.Leverage {
						if l > s.LeverageBound() {
							t.Errorf("%+v: row %d of X has leverage %.4g > bound %.4g", w, i, l, s.LeverageBound())
						}
					}
				}
			}
		}
	}
	if checked < 2*skipped || checked < 20 {
		t.Fatalf("only %d of %d settings reached full rank", checked, checked+skipped)
	}
}

// Weak shields past full rank: every row of X is certified and every fresh row of the same
// distribution lies beyond twice the bound, so leverage separates them where the residual cannot.
func TestWeakShieldsPastFullRankLeverageSeparates(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2))
	for _, bits := range []int{0, 8} {
		w := base(96, 0.1, 1, bits)
		s, dr := space(t, rng, w, true)
		in, _ := s.Score(dr.X)
		out, _ := s.Score(w.Rows(rng, dr.Common, 60))
		for i, l := range in.Leverage {
			if l > s.LeverageBound() {
				t.Errorf("bits %d: row %d of X: leverage %.3g above the bound %.3g", bits, i, l, s.LeverageBound())
			}
		}
		for i, l := range out.Leverage {
			if l < 2*s.LeverageBound() {
				t.Errorf("bits %d: fresh row %d: leverage %.3g within twice the bound %.3g", bits, i, l, s.LeverageBound())
			}
		}
		// The residual at full rank is void: everything is contained.
		for i, f := range out.Residual {
			if f > s.ResidualBound() {
				t.Errorf("bits %d: full rank, fresh row %d has residual %.3g above the bound", bits, i, f)
			}
		}
	}
}

// Below full rank the residual certifies every row of X and no fresh row, in fp32 and bf16, and the
// leverage bound is not offered (the pseudo-inverse cannot see what lies outside the row space).
func TestBelowFullRankResidualCertifies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, bits := range []int{0, 8, 11} {
		for _, m := range []int{0, 20} {
			w := base(m, 1, 1, bits)
			s, dr := space(t, rng, w, true)
			if s.FullRank() || s.Rank() != w.N+w.M {
				t.Fatalf("%+v: rank %d, want %d", w, s.Rank(), w.N+w.M)
			}
			if s.LeverageBound() != 0 {
				t.Errorf("%+v: leverage bound %.3g offered below full rank", w, s.LeverageBound())
			}
			in, _ := s.Score(dr.X)
			out, _ := s.Score(w.Rows(rng, dr.Common, 60))
			for i, f := range in.Residual {
				if f > s.ResidualBound() {
					t.Errorf("%+v: row %d of X: residual %.3g above the bound %.3g", w, i, f, s.ResidualBound())
				}
			}
			for i, f := range out.Residual {
				if f <= s.ResidualBound() {
					t.Errorf("%+v: fresh row %d: residual %.3g certified (bound %.3g)", w, i, f, s.ResidualBound())
				}
			}
		}
	}
}

// Rows dropped: the leverage bound no longer holds, so none is offered.
func TestNoLeverageBoundWithRowsDropped(t *testing.T) {
	s, _ := space(t, rand.New(rand.NewPCG(3, 4)), base(96, 1, 1, 8), false)
	if s.LeverageBound() != 0 {
		t.Fatalf("leverage bound %.3g with rows dropped", s.LeverageBound())
	}
}

// Strong shields: fresh rows are as "contained" by the leverage test as rows of X, which is why a
// claim needs the runner-up far beyond the bound and not only a certified best.
func TestStrongShieldsCertifyFreshRowsToo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	w := base(96, 10, 1, 8)
	s, dr := space(t, rng, w, true)
	out, _ := s.Score(w.Rows(rng, dr.Common, 60))
	certified := 0
	for _, l := range out.Leverage {
		if l <= s.LeverageBound() {
			certified++
		}
	}
	if certified < 50 {
		t.Fatalf("strong shields: only %d of 60 fresh rows within the leverage bound; the test world no longer models strong shields", certified)
	}
}

// k is chosen from the spectrum: a spectrum with one clear drop puts the edge in Ks.
func TestKsFindTheSpectralEdge(t *testing.T) {
	sig2 := make([]float64, 50)
	for i := range sig2 {
		sig2[i] = math.Pow(0.97, float64(i))
		if i >= 17 {
			sig2[i] *= 1e-3
		}
	}
	ks := chooseKs(sig2)
	found := false
	for _, k := range ks {
		found = found || k == 17
		if k < 1 || k >= 50 {
			t.Errorf("k %d outside [1, 50)", k)
		}
	}
	if !found {
		t.Fatalf("Ks %v miss the edge at 17", ks)
	}
}

// The measures are consistent with each other: TopK at the full retained rank is the residual, and
// fractions lie in [0, 1].
func TestTopKAtTheRankIsTheResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 6))
	w := base(0, 1, 1, 0)
	s, dr := space(t, rng, w, true)
	s.ks = []int{5, s.Rank()}
	sc, err := s.Score(w.Rows(rng, dr.Common, 10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Residual {
		if math.Abs(sc.TopK[1][i]-sc.Residual[i]) > 2e-6 /* Residuals' float32 coarse pass */ || sc.TopK[0][i] < sc.TopK[1][i] || sc.TopK[0][i] > 1 {
			t.Errorf("row %d: top-5 %.6g, top-r %.6g, residual %.6g", i, sc.TopK[0][i], sc.TopK[1][i], sc.Residual[i])
		}
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	s, dr := space(t, rand.New(rand.NewPCG(3, 7)), base(0, 1, 1, 0), true)
	for _, o := range []Options{{UnitRoundoff: 0, RankTol: 1e-3}, {UnitRoundoff: 1e-3, RankTol: 0}, {UnitRoundoff: 1e-3, RankTol: 1e-3, SigmaMinA: -1}} {
		if _, err := New(dr.U, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := s.Score(mat.NewDense(2, 10, nil)); err == nil {
		t.Error("rows of the wrong width accepted")
	}
}

// At full rank (no row-space basis) the measures still see each row's energy: top-k at k = d is
// nothing outside, smaller k leaves something outside, and Energy is the squared norm.
func TestFullRankMeasuresSeeTheRowEnergy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 8))
	w := base(96, 1, 1, 0)
	s, dr := space(t, rng, w, true)
	if !s.FullRank() || s.RowSpace() != nil {
		t.Fatalf("rank %d of %d, row space %v: want full rank and no basis", s.Rank(), s.D(), s.RowSpace() != nil)
	}
	s.ks = []int{8, s.D()}
	rows := w.Rows(rng, dr.Common, 5)
	sc, err := s.Score(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Energy {
		e := 0.0
		for _, x := range rows.RawRowView(i) {
			e += x * x
		}
		if math.Abs(sc.Energy[i]-e) > 1e-12*e || sc.TopK[1][i] > 1e-9 || !(sc.TopK[0][i] > 1e-6 && sc.TopK[0][i] < 1) || sc.Residual[i] > 1e-9 {
			t.Errorf("row %d: energy %.6g (want %.6g), top-8 %.3g, top-d %.3g, residual %.3g", i, sc.Energy[i], e, sc.TopK[0][i], sc.TopK[1][i], sc.Residual[i])
		}
	}
}
