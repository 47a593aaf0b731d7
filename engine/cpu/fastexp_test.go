package cpu

import (
	"math"
	"testing"
)

func TestExpfAccuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x < 88.7; x += 0.00137 {
		want := math.Exp(float64(x))
		rel := math.Abs(float64(expf(x))-want) / want
		worst = max(worst, rel)
	}
	// float32 epsilon is 1.19e-7: within about one ulp.
	if worst > 1.5e-7 {
		t.Fatalf("expf worst relative error %g > 1.5e-7", worst)
	}
	if expf(-200) != 0 || !math.IsInf(float64(expf(200)), 1) || expf(0) != 1 {
		t.Fatalf("expf edge cases: exp(-200)=%g exp(200)=%g exp(0)=%g", expf(-200), expf(200), expf(0))
	}
	if !math.IsInf(float64(-expf(float32(math.Inf(1)))), -1) || expf(float32(math.Inf(-1))) != 0 {
		t.Fatal("expf(+-Inf) wrong")
	}
	if v := expf(float32(math.NaN())); v == v {
		t.Fatal("expf(NaN) is not NaN")
	}
}

// TestExpAffine: the slice form (vector kernel where the CPU has one, edge
// blocks and tails in Go) agrees with expf to about an ulp everywhere,
// exactly at the edges (0 below the range, +Inf above, NaN), and its sum is
// the sum of its outputs.
func TestExpAffine(t *testing.T) {
	var src []float32
	for x := float32(-120); x < 120; x += 0.0173 {
		src = append(src, x)
	}
	src = append(src, float32(math.Inf(-1)), float32(math.Inf(1)), -0, 0, 88.5, 88.7, -87.4)
	for _, a := range []float32{1, -0.5} {
		dst := make([]float32, len(src))
		sum := expAffine(dst, src, a, 0.25)
		var want float64
		for i, v := range src {
			e := expf(a*v + 0.25)
			want += float64(dst[i])
			switch {
			case e == 0 || math.IsInf(float64(e), 0):
				if dst[i] != e {
					t.Fatalf("a=%g: exp(%g) = %g, want %g", a, a*v+0.25, dst[i], e)
				}
			case math.Abs(float64(dst[i]-e)) > 2.5e-7*float64(e):
				t.Fatalf("a=%g: exp(%g) = %g, expf gives %g", a, a*v+0.25, dst[i], e)
			}
		}
		if !math.IsInf(want, 1) && math.Abs(float64(sum)-want) > 1e-5*want {
			t.Fatalf("sum %g, outputs add to %g", sum, want)
		}
	}
	nan := []float32{1, 2, 3, float32(math.NaN()), 5, 6, 7, 8, 9}
	out := make([]float32, len(nan))
	if s := expAffine(out, nan, 1, 0); s == s || out[3] == out[3] || out[8] != expf(9) {
		t.Fatalf("NaN input: sum %g, outputs %v", s, out)
	}
	// In place, as softmaxRow uses it.
	x := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	expAffine(x, x, 1, -10)
	for i, v := range x {
		if e := expf(float32(i) - 10); math.Abs(float64(v-e)) > 2.5e-7*float64(e) {
			t.Fatalf("in place: %g, want %g", v, e)
		}
	}
}

func BenchmarkExpAffine(b *testing.B) {
	xs := make([]float32, 4096)
	for i := range xs {
		xs[i] = float32(i%200)/10 - 15
	}
	ys := make([]float32, 4096)
	for b.Loop() {
		expAffine(ys, xs, 1, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/exp")
}

func BenchmarkExpf(b *testing.B) {
	xs := make([]float32, 4096)
	for i := range xs {
		xs[i] = float32(i%200)/10 - 15
	}
	var s float32
	for b.Loop() {
		for _, x := range xs {
			s += expf(x)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/exp")
	_ = s
}

// TestExpAffineAVX2Blocks: the vector kernel does whole in-range blocks and
// stops before a block with NaN or overflow.
func TestExpAffineAVX2Blocks(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the Go loop is used")
	}
	src := make([]float32, 29)
	for i := range src {
		src[i] = float32(i) - 14
	}
	dst := make([]float32, len(src))
	done, sum := expAffineAVX2(&dst[0], &src[0], len(src), 1, 0)
	var want float32
	for i := range done {
		want += dst[i]
		if e := expf(src[i]); math.Abs(float64(dst[i]-e)) > 2.5e-7*float64(e) {
			t.Fatalf("lane %d: %g, want %g", i, dst[i], e)
		}
	}
	if done != 24 || math.Abs(float64(sum-want)) > 1e-6*float64(want) {
		t.Fatalf("done %d (want 24), sum %g (want %g)", done, sum, want)
	}
	src[10] = float32(math.NaN())
	if done, _ := expAffineAVX2(&dst[0], &src[0], len(src), 1, 0); done != 8 {
		t.Fatalf("NaN in the second block: done %d, want 8", done)
	}
	src[10] = 100 // overflows
	if done, _ := expAffineAVX2(&dst[0], &src[0], len(src), 1, 0); done != 8 {
		t.Fatalf("overflow in the second block: done %d, want 8", done)
	}
	src[10] = -1000 // underflows: stays in the kernel, gives 0
	if done, _ := expAffineAVX2(&dst[0], &src[0], len(src), 1, 0); done != 24 || dst[10] != 0 {
		t.Fatalf("underflow: done %d, exp(-1000) = %g", done, dst[10])
	}
}
