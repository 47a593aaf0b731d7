package membership

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// rightSingular returns the right singular vectors of u (d, min(n, d)), by decreasing singular
// value, and the singular values: an SVD independent of the Gram route Space takes.
func rightSingular(t *testing.T, u *mat.Dense) (*mat.Dense, []float64) {
	t.Helper()
	var svd mat.SVD
	if !svd.Factorize(u, mat.SVDThin) {
		t.Fatal("SVD of U failed")
	}
	var v mat.Dense
	svd.VTo(&v)
	return &v, svd.Values(nil)
}

// orthogonalTo returns a unit vector of width d orthogonal to the first r columns of v.
func orthogonalTo(rng *rand.Rand, v *mat.Dense, r int) []float64 {
	d, _ := v.Dims()
	g := make([]float64, d)
	for j := range g {
		g[j] = rng.NormFloat64()
	}
	for pass := 0; pass < 2; pass++ { // twice: Gram-Schmidt in float64 loses orthogonality once
		for c := 0; c < r; c++ {
			dot := 0.0
			for j := range g {
				dot += g[j] * v.At(j, c)
			}
			for j := range g {
				g[j] -= dot * v.At(j, c)
			}
		}
	}
	n := math.Sqrt(dot(g, g))
	for j := range g {
		g[j] /= n
	}
	return g
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// perturbed returns the rows of x, each moved by k rho ||x_i|| along dir(i) (a unit vector).
func perturbed(x *mat.Dense, k, rho float64, dir func(i int, row []float64) []float64) *mat.Dense {
	out := mat.DenseCopyOf(x)
	t, _ := x.Dims()
	for i := 0; i < t; i++ {
		row := out.RawRowView(i)
		nx := math.Sqrt(dot(row, row))
		e := dir(i, x.RawRowView(i))
		for j := range row {
			row[j] += k * rho * nx * e[j]
		}
	}
	return out
}

// Below full rank, a row of X recomputed with relative error rho still passes the widened
// residual bound, even when the whole error points out of the row space (the worst case); the
// bit-equal bound (rho = 0) fails every such row, which is defect (a) of issue 36; and twice the
// error fails the widened bound too, so the bound is not vacuous. rho is 3 times the rounding
// allowance ResidualSafety u_eff, so the three cases are apart by construction.
func TestResidualBoundCoversRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	for _, bits := range []int{0, 8, 11} {
		for _, m := range []int{0, 20} {
			w := base(m, 1, 1, bits)
			dr := w.Draw(rng)
			u := roundoff(bits)
			opt := Options{UnitRoundoff: u, AllObserved: true, RankTol: RankTol(dr.U, u)}
			bitEqual, err := New(dr.U, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.Recompute = 3 * ResidualSafety * bitEqual.uEff
			s, err := New(dr.U, opt)
			if err != nil {
				t.Fatal(err)
			}
			if s.FullRank() {
				t.Fatalf("%+v: full rank; the test needs a row space below d", w)
			}
			v, _ := rightSingular(t, dr.U)
			out := func(int, []float64) []float64 { return orthogonalTo(rng, v, s.Rank()) }
			for k, wantPass := range map[float64]bool{1: true, 2: false} {
				sc, err := s.Score(perturbed(dr.X, k, opt.Recompute, out))
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range sc.Residual {
					if pass := f <= s.ResidualBound(); pass != wantPass {
						t.Errorf("%+v, error %g rho (rho %.3g): row %d residual %.3g, bound %.3g: pass %v, want %v",
							w, k, opt.Recompute, i, f, s.ResidualBound(), pass, wantPass)
					}
					if k == 1 && f <= bitEqual.ResidualBound() {
						t.Errorf("%+v: row %d with error rho passes the bit-equal bound %.3g (residual %.3g): the world no longer shows the defect",
							w, i, bitEqual.ResidualBound(), f)
					}
				}
			}
		}
	}
}

// Past full rank with every row observed, a row of X recomputed with relative error rho stays
// within its own RowLeverageBound even when the error points along U's weakest direction (where
// it raises the leverage most), for weak and strong shields, kappa 1 and 100, fp32 and bf16.
// With weak shields and kappa 1, sigma_min(U) is small against the rows' norms: some of those
// rows then leave the bit-equal bound LeverageBound() (why the bound is per row), and some leave
// their own bound at thrice the error (the bound is not vacuous).
func TestRowLeverageBoundCoversRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2))
	const rho = 1e-2
	checked := 0
	for _, scale := range []float64{0.1, 1} {
		for _, kappa := range []float64{1, 100} {
			for _, bits := range []int{0, 8} {
				w := base(96, scale, kappa, bits)
				dr := w.Draw(rng)
				u := roundoff(bits)
				s, err := New(dr.U, Options{UnitRoundoff: u, AllObserved: true, RankTol: RankTol(dr.U, u), Recompute: rho})
				if err != nil {
					t.Fatal(err)
				}
				if !s.FullRank() {
					// Weak shields under kappa 100 in bf16 sink below the rounding floor: no
					// leverage bound is offered (TestLeverageOfRowsOfXIsWithinTheBound).
					continue
				}
				checked++
				v, sig := rightSingular(t, dr.U)
				if got, want := s.SigmaMin(), sig[len(sig)-1]; math.Abs(got-want) > 1e-6*sig[0] {
					t.Fatalf("%+v: sigma_min %.6g, SVD says %.6g", w, got, want)
				}
				// The weakest direction, signed so that it adds to the row's leverage.
				weakest := func(_ int, x []float64) []float64 {
					e := make([]float64, len(x))
					for j := range e {
						e[j] = v.At(j, len(sig)-1)
					}
					if dot(x, e) < 0 {
						for j := range e {
							e[j] = -e[j]
						}
					}
					return e
				}
				overBitEqual, overOwn := 0, 0
				for _, k := range []float64{1, 3} {
					sc, err := s.Score(perturbed(dr.X, k, rho, weakest))
					if err != nil {
						t.Fatal(err)
					}
					if len(sc.LeverageBound) != len(sc.Leverage) {
						t.Fatalf("%+v: %d row bounds for %d rows", w, len(sc.LeverageBound), len(sc.Leverage))
					}
					for i, l := range sc.Leverage {
						switch {
						case k == 1 && l > sc.LeverageBound[i]:
							t.Errorf("%+v: row %d with error rho: leverage %.4g above its bound %.4g", w, i, l, sc.LeverageBound[i])
						case k == 1 && l > s.LeverageBound():
							overBitEqual++
						case k == 3 && l > sc.LeverageBound[i]:
							overOwn++
						}
					}
				}
				if scale < 1 && kappa == 1 && (overBitEqual == 0 || overOwn == 0) {
					t.Errorf("%+v: %d rows with error rho beyond the bit-equal bound %.3g, %d with error 3 rho beyond their own: want some of each",
						w, overBitEqual, s.LeverageBound(), overOwn)
				}
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d of 8 settings reached full rank", checked)
	}
	// Below full rank no leverage bound is offered, per row or not.
	w := base(0, 1, 1, 0)
	dr := w.Draw(rng)
	s, err := New(dr.U, Options{UnitRoundoff: 0x1p-24, AllObserved: true, RankTol: RankTol(dr.U, 0x1p-24), Recompute: rho})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.Score(dr.X)
	if err != nil {
		t.Fatal(err)
	}
	if sc.LeverageBound != nil || s.RowLeverageBound(1) != 0 || s.SigmaMin() != 0 {
		t.Fatalf("below full rank: row bounds %v, RowLeverageBound %v, sigma_min %v; want none", sc.LeverageBound, s.RowLeverageBound(1), s.SigmaMin())
	}
}

// The formula of RecomputeError (fptol.Recompute), computed here from its documented terms, and its order:
// fp32 < fp16 < bf16, growing with depth and width.
func TestRecomputeErrorFormula(t *testing.T) {
	stage := func(u float64, width int) float64 {
		return math.Sqrt(16.0/3)*u + math.Sqrt(4*float64(width))*0x1p-24
	}
	for _, tc := range []struct {
		p             string
		u             float64
		blocks, width int
	}{{"fp32", 0x1p-24, 3, 384}, {"bf16", 0x1p-8, 3, 384}, {"fp16", 0x1p-11, 0, 4096}, {"bf16", 0x1p-8, 32, 4096}} {
		got, err := RecomputeError(tc.p, tc.blocks, tc.width)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(tc.blocks+1) * (stage(tc.u, tc.width) + stage(0x1p-24, tc.width))
		// The fit to a PyTorch deployer, 12 u' sqrt(blocks + 1) (u' = 2^-20 for fp32), where it is larger.
		uFit := tc.u
		if tc.p == "fp32" {
			uFit = 0x1p-20
		}
		want = max(want, 12*uFit*math.Sqrt(float64(tc.blocks+1)))
		if math.Abs(got-want) > 4*0x1p-53*want { // a few float64 roundings of the same formula
			t.Errorf("%s, %d blocks, width %d: %.6g, want %.6g", tc.p, tc.blocks, tc.width, got, want)
		}
	}
	f32, _ := RecomputeError("fp32", 3, 384)
	f16, _ := RecomputeError("fp16", 3, 384)
	b16, _ := RecomputeError("bf16", 3, 384)
	deeper, _ := RecomputeError("fp32", 6, 384)
	wider, _ := RecomputeError("fp32", 3, 4096)
	if !(f32 < f16 && f16 < b16 && f32 < deeper && f32 < wider) {
		t.Errorf("fp32 %.3g, fp16 %.3g, bf16 %.3g, fp32 6 blocks %.3g, fp32 width 4096 %.3g: want fp32 < fp16 < bf16 and growth with depth and width",
			f32, f16, b16, deeper, wider)
	}
	// The measured kernel spread (docs/content-recovery.md: 1.3e-6 at block 3 of MiniLM, d 384)
	// must lie below the fp32 default, or the default would re-create defect (a).
	if f32 < 1.3e-6 {
		t.Errorf("fp32 default %.3g below the measured spread 1.3e-6", f32)
	}
	for _, bad := range []struct {
		p             string
		blocks, width int
	}{{"fp8", 3, 384}, {"", 3, 384}, {"fp32", -1, 384}, {"fp32", 3, 0}} {
		if _, err := RecomputeError(bad.p, bad.blocks, bad.width); err == nil {
			t.Errorf("RecomputeError(%q, %d, %d) accepted", bad.p, bad.blocks, bad.width)
		}
	}
	if _, err := New(mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Options{UnitRoundoff: 0x1p-24, RankTol: 1e-3, Recompute: 1}); err == nil {
		t.Error("recomputation error 1 accepted")
	}
}

// roundBits rounds x to nearest with bits mantissa bits (ties away: immaterial here).
func roundBits(x float64, bits int) float64 {
	if x == 0 {
		return 0
	}
	q := math.Ldexp(1, int(math.Floor(math.Log2(math.Abs(x))))-bits+1)
	return math.Round(x/q) * q
}

// StoredRecompute covers what rounding to a storage format does to two rows that differ by far
// less than its unit round-off: elements on either side of a rounding boundary flip a whole unit
// in the last place. The adversarial rows (every element just below a boundary, the other row
// just above) reach the bound within 0.1%, so a bound of 1 u instead of 2 u would fail here;
// random rows flip only some elements and stay far below it, but far above rho itself.
func TestStoredRecomputeCoversRoundingFlips(t *testing.T) {
	const bits = 11 // float16's 11 significant bits: unit round-off 2^-11
	uStore := math.Ldexp(1, -bits)
	rng := rand.New(rand.NewPCG(36, 3))
	const d = 384
	rel := func(a, b []float64) (float64, float64) {
		var diff, na, raw, rawDiff float64
		for j := range a {
			ra, rb := roundBits(a[j], bits), roundBits(b[j], bits)
			diff += (ra - rb) * (ra - rb)
			na += ra * ra
			rawDiff += (a[j] - b[j]) * (a[j] - b[j])
			raw += a[j] * a[j]
		}
		return math.Sqrt(diff / na), math.Sqrt(rawDiff / raw)
	}
	// Adversarial: a_j just above 1, just below the midpoint between two float16 neighbours
	// (spacing 2 uStore in [1, 2)), b_j just above it: every element flips a whole unit, 2 uStore
	// relative.
	a, b := make([]float64, d), make([]float64, d)
	for j := range a {
		k := float64(rng.IntN(4))
		mid := 1 + (2*k+1)*uStore
		a[j], b[j] = mid*(1-1e-9), mid*(1+1e-9)
	}
	got, rho := rel(a, b)
	// Elements up to 1 + 7 uStore: the flip is 2 uStore / (1 + 7 uStore) relative at worst.
	if bound := StoredRecompute(rho, uStore); got > bound || got < bound*(1-uStore)/(1+8*uStore) {
		t.Errorf("adversarial rows: rounded difference %.6g, bound %.6g: want just below it", got, bound)
	}
	// Random rows with a relative difference of 1e-6 (the measured fp32 kernel spread): a few
	// elements flip, each by a unit of 2^-10 of itself, which rho alone does not cover.
	largest, rhoMax := 0.0, 0.0
	for trial := 0; trial < 20; trial++ {
		for j := range a {
			a[j] = rng.NormFloat64()
			b[j] = a[j] * (1 + 1e-6*rng.NormFloat64())
		}
		got, rho := rel(a, b)
		if got > StoredRecompute(rho, uStore) {
			t.Errorf("random rows: rounded difference %.3g above the bound %.3g (rho %.3g)", got, StoredRecompute(rho, uStore), rho)
		}
		largest, rhoMax = max(largest, got), max(rhoMax, rho)
	}
	if largest < 10*rhoMax {
		t.Errorf("random rows: rounded differences at most %.3g against rho up to %.3g: no rounding flip seen", largest, rhoMax)
	}
	if StoredRecompute(1e-6, 0) != 1e-6 {
		t.Error("no storage rounding changed rho")
	}
}
