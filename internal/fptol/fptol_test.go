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

// Recompute is the larger of its two documented terms, grows with depth, orders the precisions
// fp32 < fp16 < bf16, and refuses what it cannot bound.
func TestRecompute(t *testing.T) {
	// bf16 at block 3, d 64: the fit (12 2^-8 2 = 0.094) is above the rounding model (0.036) and
	// above the 5.0e-2 measured against PyTorch that the rounding model alone missed.
	b, err := Recompute(PrecisionBF16, 3, 64)
	if err != nil || b < 5.0e-2 || math.Abs(b-12*BFloat16*2) > 1e-15 {
		t.Fatalf("Recompute(bf16, 3, 64) = %v, %v: want the fitted 0.09375", b, err)
	}
	// fp32 at d 4096: the accumulation term of the rounding model dominates the fit.
	f, _ := Recompute(PrecisionFP32, 3, 4096)
	stage := func(u float64) float64 { return math.Sqrt(16.0/3)*u + math.Sqrt(4*4096)*Float32 }
	if want := 4 * (stage(Float32) + stage(Float32)); math.Abs(f-want) > 1e-18 {
		t.Fatalf("Recompute(fp32, 3, 4096) = %v, want the derived %v", f, want)
	}
	f16, _ := Recompute(PrecisionFP16, 3, 4096)
	deeper, _ := Recompute(PrecisionBF16, 8, 64)
	if !(f < f16 && f16 < b && b < deeper) {
		t.Fatalf("fp32 %v, fp16 %v, bf16 %v, bf16 deeper %v: order wrong", f, f16, b, deeper)
	}
	for _, bad := range []struct {
		p    string
		b, w int
	}{{"fp8", 0, 1}, {PrecisionBF16, -1, 1}, {PrecisionBF16, 0, 0}} {
		if _, err := Recompute(bad.p, bad.b, bad.w); err == nil {
			t.Errorf("Recompute(%q, %d, %d) accepted", bad.p, bad.b, bad.w)
		}
	}
}
