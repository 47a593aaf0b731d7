package gelo

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestHaarIsOrthogonalInFloat32AtN1024(t *testing.T) {
	n := 1024
	if raceEnabled {
		n = 256
	}
	var mx mixer
	a := make([]float32, n*n) // a: (n, n)
	mx.orthogonal(rand.New(rand.NewPCG(1, 1)), n, a)
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
func haarStats(n, draws int, signFix bool) (tr, tr2, trSq, detPos float64) {
	var mx mixer
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
	tr, tr2, trSq, detPos := haarStats(n, draws, true)
	t.Logf("sign-fixed: E tr=%.3f E tr^2=%.3f E tr(Q^2)=%.3f P(det>0)=%.3f", tr, tr2, trSq, detPos)
	if !ok(tr, tr2, trSq, detPos) {
		t.Fatal("sign-fixed QR is not Haar")
	}
	tr, tr2, trSq, detPos = haarStats(n, draws, false)
	t.Logf("unfixed:    E tr=%.3f E tr^2=%.3f E tr(Q^2)=%.3f P(det>0)=%.3f", tr, tr2, trSq, detPos)
	if ok(tr, tr2, trSq, detPos) {
		t.Fatal("the statistic does not tell the unfixed QR from Haar")
	}
}

func TestNonOrthogonalConditionNumberIsKappa(t *testing.T) {
	const n = 48
	var mx mixer
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kappa := range []float64{1, 10, 1000} {
		a := make([]float32, n*n)
		mx.nonOrthogonal(rng, n, kappa, a)
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
			t.Fatalf("kappa %v: cond(A) = %v", kappa, cond)
		}
		// The singular values are exactly the log-spaced set 1 .. kappa.
		for i := range sv {
			want := math.Pow(kappa, float64(n-1-i)/float64(n-1))
			if math.Abs(sv[i]/want-1) > 1e-4 {
				t.Fatalf("kappa %v: singular value %d = %v, want %v", kappa, i, sv[i], want)
			}
		}
	}
}
