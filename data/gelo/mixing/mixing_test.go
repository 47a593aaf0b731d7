package mixing

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"gonum.org/v1/gonum/mat"
)

// mixPath is one way the mixer can draw: LAPACK through the default library, or the scalar Go
// QR that runs when the library has no LAPACK (forced here with gonum's library).
type mixPath struct {
	name string
	lib  *blas.Library
}

// mixPaths are the scalar Go path, and the LAPACK path when the default library has LAPACK.
func mixPaths(t testing.TB) []mixPath {
	paths := []mixPath{{"go", blas.Gonum()}}
	if blas.HasLAPACK() {
		paths = append(paths, mixPath{"lapack", blas.Default()})
	} else {
		t.Logf("no LAPACK in %s: testing the scalar Go QR only", blas.Name())
	}
	return paths
}

func TestHaarIsOrthogonalInFloat32AtN1024(t *testing.T) {
	n := 1024
	if testing.Short() {
		n = 256
	}
	var mx Mixer
	a := make([]float32, n*n) // a: (n, n)
	mx.Orthogonal(rand.New(rand.NewPCG(1, 1)), n, a)
	g := gram(n, a)
	var maxDev, frob float64
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			e := math.Abs(float64(g[i*n+j]) - want)
			maxDev = max(maxDev, e)
			frob += e * e
		}
	}
	frob = math.Sqrt(frob)
	t.Logf("n=%d: max |A^T A - I| = %.2e, ||A^T A - I||_F = %.2e", n, maxDev, frob)
	if maxDev > 2e-6 || frob > 1e-4 {
		t.Fatalf("A^T A - I: max %.2e, Frobenius %.2e", maxDev, frob)
	}
}

// haarStats returns, over draws of n x n matrices, the mean of tr Q, of (tr Q)^2, of tr(Q^2), and
// the fraction with det Q > 0.
func haarStats(lib *blas.Library, n, draws int, signFix bool) (tr, tr2, trSq, detPos float64) {
	mx := Mixer{Lib: lib}
	rng := rand.New(rand.NewPCG(7, 8))
	q := make([]float64, n*n) // column-major
	for k := 0; k < draws; k++ {
		mx.haar(rng, n, q, signFix)
		var s, s2 float64
		for i := 0; i < n; i++ {
			s += q[i*n+i]
			for j := 0; j < n; j++ {
				s2 += q[j*n+i] * q[i*n+j] // (Q^2)_ii = sum_j Q_ij Q_ji
			}
		}
		tr += s
		tr2 += s * s
		trSq += s2
		if mat.Det(mat.NewDense(n, n, slices.Clone(q))) > 0 {
			detPos++
		}
	}
	d := float64(draws)
	return tr / d, tr2 / d, trSq / d, detPos / d
}

// Haar measure on O(n) has E[tr Q] = 0, E[(tr Q)^2] = 1, E[tr Q^2] = 1 (Diaconis and Shahshahani)
// and det Q = +1 or -1 with probability 1/2 each. Householder QR without the sign fix has a
// negatively biased diagonal and det Q = (-1)^n always, so the same checks must reject it.
func TestHaarMomentsAndSignFixIsNeeded(t *testing.T) {
	const n, draws = 5, 4000
	ok := func(tr, tr2, trSq, detPos float64) bool {
		return math.Abs(tr) < 0.1 && math.Abs(tr2-1) < 0.15 && math.Abs(trSq-1) < 0.15 && math.Abs(detPos-0.5) < 0.05
	}
	for _, p := range mixPaths(t) {
		tr, tr2, trSq, detPos := haarStats(p.lib, n, draws, true)
		t.Logf("%s sign-fixed: E tr=%.3f E tr^2=%.3f E tr(Q^2)=%.3f P(det>0)=%.3f", p.name, tr, tr2, trSq, detPos)
		if !ok(tr, tr2, trSq, detPos) {
			t.Fatalf("%s: sign-fixed QR is not Haar", p.name)
		}
		tr, tr2, trSq, detPos = haarStats(p.lib, n, draws, false)
		t.Logf("%s unfixed:    E tr=%.3f E tr^2=%.3f E tr(Q^2)=%.3f P(det>0)=%.3f", p.name, tr, tr2, trSq, detPos)
		if ok(tr, tr2, trSq, detPos) {
			t.Fatalf("%s: the statistic does not tell the unfixed QR from Haar", p.name)
		}
	}
}

func TestConditionedConditionNumberIsKappa(t *testing.T) {
	const n = 48
	for _, p := range mixPaths(t) {
		mx := Mixer{Lib: p.lib}
		rng := rand.New(rand.NewPCG(5, 6))
		for _, kappa := range []float64{1, 10, 1000} {
			a := make([]float32, n*n)
			mx.Conditioned(rng, n, kappa, a)
			a64 := make([]float64, n*n)
			for i, v := range a {
				a64[i] = float64(v)
			}
			var svd mat.SVD
			if !svd.Factorize(mat.NewDense(n, n, a64), mat.SVDNone) {
				t.Fatal("SVD failed")
			}
			sv := svd.Values(nil) // descending
			cond := sv[0] / sv[n-1]
			if math.Abs(cond/kappa-1) > 0.01 {
				t.Fatalf("%s kappa %v: cond(A) = %v", p.name, kappa, cond)
			}
			// The singular values are exactly the log-spaced set 1 .. kappa.
			for i := range sv {
				want := math.Pow(kappa, float64(n-1-i)/float64(n-1))
				if math.Abs(sv[i]/want-1) > 1e-4 {
					t.Fatalf("%s kappa %v: singular value %d = %v, want %v", p.name, kappa, i, sv[i], want)
				}
			}
		}
	}
}

// TestHaarLAPACKIsOrthogonalAndMatchesGo: on LAPACK the float64 Q is orthogonal to 1e-12, and
// from the same stream it is the scalar Go QR's Q to round-off (1e-12), so the float32 A of
// Orthogonal and Conditioned differ by at most a few units in the last place, and the
// streams stay aligned (the next draw after each matrix is the same).
func TestHaarLAPACKIsOrthogonalAndMatchesGo(t *testing.T) {
	if !blas.HasLAPACK() {
		t.Skipf("no LAPACK in %s", blas.Name())
	}
	lapack, scalar := Mixer{Lib: blas.Default()}, Mixer{Lib: blas.Gonum()}
	for _, n := range []int{1, 7, 64, 200} {
		ql, qg := make([]float64, n*n), make([]float64, n*n) // column-major
		rl, rg := rand.New(rand.NewPCG(uint64(n), 3)), rand.New(rand.NewPCG(uint64(n), 3))
		lapack.haar(rl, n, ql, true)
		scalar.haar(rg, n, qg, true)
		if a, b := rl.Uint64(), rg.Uint64(); a != b {
			t.Fatalf("n=%d: the streams diverge after the draw", n)
		}
		var dq, orth float64
		for i := range ql {
			dq = max(dq, math.Abs(ql[i]-qg[i]))
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for k := 0; k < n; k++ {
					s += ql[i*n+k] * ql[j*n+k]
				}
				if i == j {
					s--
				}
				orth = max(orth, math.Abs(s))
			}
		}
		t.Logf("n=%d: max |Q_lapack - Q_go| = %.2e, max |Q^T Q - I| = %.2e", n, dq, orth)
		if dq > 1e-12 || orth > 1e-12 {
			t.Fatalf("n=%d: |dQ| %.2e, |Q^T Q - I| %.2e, want both <= 1e-12", n, dq, orth)
		}
		for _, kappa := range []float64{0, 100} { // 0: orthogonal
			al, ag := make([]float32, n*n), make([]float32, n*n)
			rl, rg := rand.New(rand.NewPCG(uint64(n), 4)), rand.New(rand.NewPCG(uint64(n), 4))
			if kappa == 0 {
				lapack.Orthogonal(rl, n, al)
				scalar.Orthogonal(rg, n, ag)
			} else {
				lapack.Conditioned(rl, n, kappa, al)
				scalar.Conditioned(rg, n, kappa, ag)
			}
			var da, amax float64
			for i := range al {
				da = max(da, math.Abs(float64(al[i]-ag[i])))
				amax = max(amax, math.Abs(float64(ag[i])))
			}
			// A few float32 ulps of the largest entry: round-off, not another matrix.
			if tol := 4 * amax * 0x1p-24; da > tol {
				t.Fatalf("n=%d kappa=%v: max |A_lapack - A_go| = %.2e > %.2e", n, kappa, da, tol)
			}
		}
	}
}

// gram computes A^T A in float32 (through the default BLAS) for a: (n, n).
func gram(n int, a []float32) []float32 {
	g := make([]float32, n*n)
	blas.Sgemm(true, false, n, n, n, 1, a, n, a, n, 0, g, n)
	return g
}

// Inverse gives A^-1 from the draw's factors: A A^-1 = I to float64 round-off times cond(A), for
// orthogonal and conditioned draws on every path, and it refuses a second call for one draw.
func TestInverseFromFactors(t *testing.T) {
	const n = 37
	for _, p := range mixPaths(t) {
		mx := Mixer{Lib: p.lib}
		for _, kappa := range []float64{0, 1, 30, 1e4} { // 0: orthogonal
			rng := rand.New(rand.NewPCG(9, uint64(kappa)))
			a, ainv := make([]float64, n*n), make([]float64, n*n)
			if kappa == 0 {
				mx.Orthogonal64(rng, n, a)
			} else {
				mx.Conditioned64(rng, n, kappa, a)
			}
			if err := mx.Inverse64(ainv); err != nil {
				t.Fatal(err)
			}
			if err := mx.Inverse64(ainv); err == nil {
				t.Fatalf("%s kappa %v: a second Inverse64 for one draw was accepted", p.name, kappa)
			}
			prod := mat.NewDense(n, n, nil)
			prod.Mul(mat.NewDense(n, n, a), mat.NewDense(n, n, ainv))
			var dev float64
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					want := 0.0
					if i == j {
						want = 1
					}
					dev = max(dev, math.Abs(prod.At(i, j)-want))
				}
			}
			// Each entry of the product is a sum of n terms bounded by cond(A) in magnitude.
			if tol := 16 * float64(n) * max(1, kappa) * 0x1p-53; dev > tol {
				t.Fatalf("%s kappa %v: max |A A^-1 - I| = %.2e > %.2e", p.name, kappa, dev, tol)
			}
		}
	}
}
