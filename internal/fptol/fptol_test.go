package fptol

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Known answers of gamma_k.
func TestGamma(t *testing.T) {
	if g := Gamma(1, 0.5); g != 1 {
		t.Fatalf("gamma_1(0.5) = %v, want 1", g)
	}
	if g := Gamma(2, 0.5); !math.IsInf(g, 1) {
		t.Fatalf("gamma_2(0.5) = %v, want +Inf", g)
	}
	if g, want := Gamma(100, Float32), 100*Float32/(1-100*Float32); g != want {
		t.Fatalf("gamma_100 = %v, want %v", g, want)
	}
}

// The bound holds for a dot product summed in two orders (forward and pairwise) in float32, and
// is not vacuous: the orders do differ.
func TestChainCoversSummationOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const k = 4096
	worst, differ := 0.0, false
	for trial := 0; trial < 50; trial++ {
		a, b := make([]float32, k), make([]float32, k)
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		var fwd float32
		for i := range a {
			fwd += a[i] * b[i]
		}
		pw := pairwise(a, b)
		var exact float64
		for i := range a {
			exact += float64(a[i]) * float64(b[i])
		}
		if fwd != pw {
			differ = true
		}
		worst = max(worst, math.Abs(float64(fwd-pw))/math.Abs(exact))
	}
	if !differ {
		t.Fatal("forward and pairwise sums agreed bit for bit: the test does not exercise rounding")
	}
	// One stage; the median |exact| is about sqrt(k), so a relative bound against it holds with
	// a margin except for rare near-cancelling draws, which the max over 50 does not meet here.
	if tol := Chain(1, k, Float32); worst > tol {
		t.Fatalf("two summation orders differ by %g relative, bound %g", worst, tol)
	}
}

func pairwise(a, b []float32) float32 {
	if len(a) <= 8 {
		var s float32
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	h := len(a) / 2
	return pairwise(a[:h], b[:h]) + pairwise(a[h:], b[h:])
}
