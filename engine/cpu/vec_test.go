package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// vecInputs is n values for the elementwise loops: mostly Gaussian, with zeros of both signs,
// infinities, NaN, subnormals and large values sprinkled in, so that the eight-lane loops meet
// every IEEE case the Go loops do.
func vecInputs(r *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-40, -3e-39, 3e38, -2e38, 1}
	x := make([]float32, n)
	for i := range x {
		if r.IntN(9) == 0 {
			x[i] = special[r.IntN(len(special))]
		} else {
			x[i] = float32(r.NormFloat64() * 3)
		}
	}
	return x
}

// sameBits reports whether a and b hold the same bits, NaNs of any payload counted equal.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool {
		return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
	})
}

// withoutAVX2 runs fn with the eight-lane loops switched off: the Go loops alone.
func withoutAVX2(fn func()) {
	saved := hasAVX2
	hasAVX2 = false
	defer func() { hasAVX2 = saved }()
	fn()
}

// TestVecLoopsMatchGo: every eight-lane loop gives the bits its Go loop gives, on every length
// from 0 to 40 (whole blocks, tails, shorter than a block) and a long one, with special values
// among the inputs, and accumulation on and off. Where the CPU lacks AVX2 both sides are the Go
// loop and the test holds trivially.
func TestVecLoopsMatchGo(t *testing.T) {
	if !hasAVX2 {
		t.Log("no AVX2: both sides run the Go loops")
	}
	r := rand.New(rand.NewPCG(11, 3))
	lengths := []int{1000}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		in := [6][]float32{}
		for i := range in {
			in[i] = vecInputs(r, n)
		}
		// check runs body on fresh copies of the inputs with and without AVX2 and compares all six.
		check := func(name string, body func(x [6][]float32)) {
			t.Helper()
			var vec, scalar [6][]float32
			for i := range in {
				vec[i], scalar[i] = slices.Clone(in[i]), slices.Clone(in[i])
			}
			body(vec)
			withoutAVX2(func() { body(scalar) })
			for i := range vec {
				if !sameBits(vec[i], scalar[i]) {
					t.Fatalf("%s, n %d: slice %d differs:\n vector %v\n Go     %v", name, n, i, vec[i], scalar[i])
				}
			}
		}
		check("swigluForward", func(x [6][]float32) { swigluForward(x[0], x[1], x[2]) })
		for _, acc := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			check("swigluBackward", func(x [6][]float32) { swigluBackward(x[0], x[1], x[2], x[3], x[4], x[5], acc[0], acc[1]) })
		}
		k := &adamwConsts{b1: 0.9, c1: 0.1, b2: 0.999, c2: 1 - float32(0.999), decay: 1 - 1e-3*0.1, step: 1e-3 / 0.19, invBC2: 1 / 0.0199, eps: 1e-8}
		check("adamwUpdate", func(x [6][]float32) {
			for i := range x[3] {
				x[3][i] = float32(math.Abs(float64(x[3][i]))) // v >= 0, as AdamW keeps it
			}
			adamwUpdate(x[0], x[1], x[2], x[3], k)
		})
		check("maxOf", func(x [6][]float32) { x[1] = append(x[1][:0], maxOf(x[0])) })
		check("scaleSlice", func(x [6][]float32) { scaleSlice(x[0], 0.37) })
		check("softmaxGrad", func(x [6][]float32) { softmaxGrad(x[0], x[1], 0.25, 0.17) })
		check("scaledProduct", func(x [6][]float32) { scaledProduct(x[0], x[1], x[2], 0.61) })
		check("rmsNormGrad", func(x [6][]float32) { rmsNormGrad(x[0], x[1], x[2], x[3], 1.7, -0.3) })
		check("accScaledProduct", func(x [6][]float32) { accScaledProduct(x[0], x[1], x[2], 0.83) })
	}
}

// TestMaxOfKnown: maxOf finds the largest element wherever it sits, passes over NaN as the
// comparison loop does, and is -Inf for an empty slice.
func TestMaxOfKnown(t *testing.T) {
	for n := 1; n <= 37; n++ {
		for at := range n {
			x := make([]float32, n)
			for i := range x {
				x[i] = -float32(i) - 1
			}
			x[at] = 5
			if n > 1 {
				x[(at+1)%n] = float32(math.NaN())
			}
			if got := maxOf(x); got != 5 {
				t.Fatalf("n %d, max at %d: maxOf = %v, want 5", n, at, got)
			}
		}
	}
	if got := maxOf(nil); !math.IsInf(float64(got), -1) {
		t.Errorf("maxOf(nil) = %v, want -Inf", got)
	}
}
