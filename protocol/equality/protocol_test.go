package equality

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"gonum.org/v1/gonum/mat"
)

// protoCase draws a linear layer with a large bias and rows of very different norms (as hidden
// states have outlier tokens).
func protoCase(t, in, out int, seed uint64) (x, w, b []float32) {
	r := rand.New(rand.NewPCG(seed, 3))
	x = make([]float32, t*in)
	for i := range x {
		x[i] = float32(r.NormFloat64() * float64(1+i/in%3*5))
	}
	w = make([]float32, out*in)
	for i := range w {
		w[i] = float32(r.NormFloat64() / math.Sqrt(float64(in)))
	}
	b = make([]float32, out)
	for i := range b {
		b[i] = float32(5 * r.NormFloat64())
	}
	return x, w, b
}

func baseCall(mix Mix) call {
	return call{textID: 42, layer: 3, which: "v", mix: mix, precision: FP32, trusted: TrustedFP64, frac: 0, scale: 4, seed: 9}
}

// TestGeloLinearFP32IsExact: in float32 storage the protocol returns x W^T + b to round-off
// amplified by at most cond(A), for every mix, with and without shields and with a float32
// trusted side; the shield rows' outputs are dropped (the t rows asked for are the only ones
// written, and k = ceil(frac t)).
func TestGeloLinearFP32IsExact(t *testing.T) {
	const tt, in, out = 20, 24, 12
	x, w, b := protoCase(tt, in, out, 1)
	want := linearRef(x, tt, in, w, b, out)
	lib := blas.Default()
	for _, mix := range []Mix{{Orthogonal: true, Kappa: 1}, {Kappa: 1}, {Kappa: 10}, {Kappa: 1000}} {
		for _, trusted := range []string{TrustedFP64, TrustedFP32} {
			var unshielded []float32
			for _, frac := range []float64{0, 0.2} {
				c := baseCall(mix)
				c.trusted, c.frac = trusted, frac
				var sc scratch
				dst := make([]float32, (tt+8)*out)
				for i := tt * out; i < len(dst); i++ {
					dst[i] = float32(math.NaN())
				}
				k, err := sc.gelo(lib, c, x, tt, in, w, b, out, dst)
				if err != nil {
					t.Fatal(err)
				}
				if want := int(math.Ceil(frac * tt)); k != want {
					t.Errorf("%s %s frac %v: %d shield rows, want %d", mix.Name(), trusted, frac, k, want)
				}
				for i := tt * out; i < len(dst); i++ {
					if !math.IsNaN(float64(dst[i])) {
						t.Fatalf("%s %s frac %v: row %d beyond the t rows was written", mix.Name(), trusted, frac, i/out)
					}
				}
				// float32 round-off ~6e-8 per rounding, grown by cond(A), shields at 4x and the sums.
				tol := 5e-7 * mix.Kappa
				if trusted == TrustedFP32 {
					tol *= 4
				}
				if e := relErr(dst[:tt*out], want); e > tol {
					t.Errorf("%s trusted %s shields %v: relative error %.3g > %.3g", mix.Name(), trusted, frac, e, tol)
				}
				// With and without shields: the same output up to the same round-off.
				if frac == 0 {
					unshielded = slices.Clone(dst[:tt*out])
				} else if e := relErr(dst[:tt*out], unshielded); e > 2*tol {
					t.Errorf("%s trusted %s: shields changed the output by %.3g > %.3g", mix.Name(), trusted, e, 2*tol)
				}
			}
		}
	}
}

// TestBiasAfterUnmix: adding b on the accelerator, A^-1 (U W^T + 1 b^T), would give
// X W^T + (A^-1 1) b^T; the protocol adds b on the trusted side and gets X W^T + b.
func TestBiasAfterUnmix(t *testing.T) {
	const tt, in, out = 16, 8, 6
	x, w, b := protoCase(tt, in, out, 2)
	want := linearRef(x, tt, in, w, b, out)
	var sc scratch
	c := baseCall(Mix{Kappa: 10})
	got := make([]float32, tt*out)
	if _, err := sc.gelo(blas.Default(), c, x, tt, in, w, b, out, got); err != nil {
		t.Fatal(err)
	}
	if e := relErr(got, want); e > 1e-5 {
		t.Fatalf("bias after unmixing: relative error %.3g", e)
	}
	// The wrong way, in float64 with the same A: A^-1 (A X W^T + 1 b^T) = X W^T + (A^-1 1) b^T.
	n := tt
	a := mat.NewDense(n, n, slices.Clone(sc.a[:n*n]))
	xw := mat.NewDense(n, out, nil)
	for r := 0; r < n; r++ {
		for o := 0; o < out; o++ {
			var s float64
			for i := 0; i < in; i++ {
				s += float64(x[r*in+i]) * float64(w[o*in+i])
			}
			xw.Set(r, o, s)
		}
	}
	var y mat.Dense
	y.Mul(a, xw)
	for r := 0; r < n; r++ {
		for o := 0; o < out; o++ {
			y.Set(r, o, y.At(r, o)+float64(b[o]))
		}
	}
	var wrong mat.Dense
	if err := wrong.Solve(a, &y); err != nil {
		t.Fatal(err)
	}
	bad := make([]float32, n*out)
	for r := 0; r < n; r++ {
		for o := 0; o < out; o++ {
			bad[r*out+o] = float32(wrong.At(r, o))
		}
	}
	if e := relErr(bad, want); e < 0.1 {
		t.Fatalf("bias on the accelerator came out right (relative error %.3g): the test lost its point", e)
	}
}

// TestDrawA: orthogonal A has A^T A = I; non-orthogonal A has cond(A) = kappa and the computed
// inverse inverts it; draws repeat for the same key, differ across texts, and do not depend on
// the storage precision (every precision sees the same A).
func TestDrawA(t *testing.T) {
	const n = 30
	var sc scratch
	c := baseCall(Mix{Orthogonal: true, Kappa: 1})
	if err := sc.drawA(c, n); err != nil {
		t.Fatal(err)
	}
	a := mat.NewDense(n, n, slices.Clone(sc.a[:n*n]))
	var ata mat.Dense
	ata.Mul(a.T(), a)
	if !mat.EqualApprox(&ata, eye(n), 1e-12) {
		t.Fatal("orthogonal A: A^T A != I")
	}

	c.mix = Mix{Kappa: 100}
	if err := sc.drawA(c, n); err != nil {
		t.Fatal(err)
	}
	a = mat.NewDense(n, n, slices.Clone(sc.a[:n*n]))
	if k := mat.Cond(a, 2); math.Abs(k-100) > 1e-6 {
		t.Fatalf("cond(A) = %v, want 100", k)
	}
	var prod mat.Dense
	prod.Mul(a, mat.NewDense(n, n, sc.ainv[:n*n]))
	if !mat.EqualApprox(&prod, eye(n), 1e-10) {
		t.Fatal("A A^-1 != I")
	}
	first := slices.Clone(sc.a[:n*n])

	c.precision = BF16
	if err := sc.drawA(c, n); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sc.a[:n*n], first) {
		t.Fatal("A depends on the storage precision")
	}
	c.textID++
	if err := sc.drawA(c, n); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(sc.a[:n*n], first) {
		t.Fatal("two texts drew the same A")
	}
}

func eye(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		m.Set(i, i, 1)
	}
	return m
}

// TestShieldRows: shields have the configured expected norm relative to the mean input row
// norm, and the same draw for every mix.
func TestShieldRows(t *testing.T) {
	const tt, in = 200, 64
	x, _, _ := protoCase(tt, in, 1, 4)
	var m float64
	for r := 0; r < tt; r++ {
		m += norm(x[r*in : (r+1)*in])
	}
	m /= tt
	var sc scratch
	c := baseCall(Mix{Orthogonal: true, Kappa: 1})
	c.scale = 4
	sc.drawShields(c, x, tt, in, 50)
	var ss float64
	for _, v := range sc.shields {
		ss += float64(v) * float64(v)
	}
	if got := math.Sqrt(ss / 50); math.Abs(got/(4*m)-1) > 0.05 {
		t.Fatalf("shield RMS row norm %.4g, want about %.4g", got, 4*m)
	}
	first := slices.Clone(sc.shields)
	c.mix = Mix{Kappa: 1000}
	sc.drawShields(c, x, tt, in, 50)
	if !slices.Equal(first, sc.shields) {
		t.Fatal("shields depend on the mix")
	}
}

// TestRoundingGrowsWithKappa: in bf16 one projection's error grows with cond(A), and an
// orthogonal A costs little more than the rounding alone.
func TestRoundingGrowsWithKappa(t *testing.T) {
	const tt, in, out = 40, 64, 64
	x, w, b := protoCase(tt, in, out, 5)
	want := linearRef(x, tt, in, w, b, out)
	lib := blas.Default()
	var sc scratch
	only := make([]float32, tt*out)
	sc.precisionOnly(lib, BF16, x, tt, in, w, b, out, only)
	base := relErr(only, want)
	errAt := func(mix Mix) float64 {
		c := baseCall(mix)
		c.precision = BF16
		got := make([]float32, tt*out)
		if _, err := sc.gelo(lib, c, x, tt, in, w, b, out, got); err != nil {
			t.Fatal(err)
		}
		return relErr(got, want)
	}
	orth, k10, k1000 := errAt(Mix{Orthogonal: true, Kappa: 1}), errAt(Mix{Kappa: 10}), errAt(Mix{Kappa: 1000})
	t.Logf("bf16 relative error: rounding only %.3g, orthogonal %.3g, kappa 10 %.3g, kappa 1000 %.3g", base, orth, k10, k1000)
	if !(base > 1e-4 && orth < 4*base && k10 > orth && k1000 > 10*k10) {
		t.Fatalf("want rounding only > 1e-4, orthogonal < 4x that, kappa 10 > orthogonal, kappa 1000 > 10x kappa 10")
	}
}

func TestRoundTo(t *testing.T) {
	x := []float32{1 + 1.0/512, 70000, 1e-8, float32(math.Pi)}
	bf := slices.Clone(x)
	roundTo(BF16, bf)
	fp := slices.Clone(x)
	roundTo(FP16, fp)
	f32 := slices.Clone(x)
	roundTo(FP32, f32)
	if !slices.Equal(f32, x) {
		t.Errorf("fp32 rounding changed %v to %v", x, f32)
	}
	// 1 + 2^-9 is a tie in bf16 (7 fraction bits) and rounds to even (1); fp16 keeps it.
	if bf[0] != 1 || fp[0] != x[0] {
		t.Errorf("1+2^-9: bf16 %v (want 1), fp16 %v (want exact)", bf[0], fp[0])
	}
	if !math.IsInf(float64(fp[1]), 1) || math.IsInf(float64(bf[1]), 0) {
		t.Errorf("70000: fp16 %v (want +Inf), bf16 %v (want finite)", fp[1], bf[1])
	}
	if fp[2] != 0 || bf[2] == 0 {
		t.Errorf("1e-8: fp16 %v (want 0: below half the smallest subnormal), bf16 %v (want nonzero)", fp[2], bf[2])
	}
}
