package store

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestFloat16WidenIsExactAndNarrowInverts(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := FromFloat16(h)
		if isNaN16(h) {
			if !math.IsNaN(float64(f)) || !isNaN16(ToFloat16(f)) {
				t.Fatalf("NaN %#04x widened to %v, narrowed to %#04x", h, f, ToFloat16(f))
			}
			continue
		}
		// Oracle: the definition of binary16. (arrow-go's float16.Num.Float32 is not one: it
		// gets subnormals wrong, e.g. 0x0001 -> 1.1e-41 instead of 2^-24.)
		exp, man := int(h>>10)&0x1f, float64(h&0x3ff)
		want := math.Ldexp(1+man/1024, exp-15)
		if exp == 0 {
			want = math.Ldexp(man, -24)
		} else if exp == 0x1f {
			want = math.Inf(1)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if math.Float32bits(f) != math.Float32bits(float32(want)) {
			t.Fatalf("FromFloat16(%#04x) = %v, want %v", h, f, want)
		}
		if back := ToFloat16(f); back != h {
			t.Fatalf("ToFloat16(FromFloat16(%#04x)) = %#04x", h, back)
		}
	}
}

// nearestHalf is a brute-force reference for ToFloat16: the closest of all finite binary16
// values in float64 arithmetic, ties to the even bit pattern, overflow to infinity at 65520.
func nearestHalf(sorted []uint16, vals []float64, x float32) uint16 {
	v := float64(x)
	sign := uint16(0)
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	if v >= 65520 {
		return sign | 0x7c00
	}
	k := sort.SearchFloat64s(vals, v)
	best := k
	if k == len(vals) || (k > 0 && v-vals[k-1] < vals[k]-v) {
		best = k - 1
	} else if k > 0 && v-vals[k-1] == vals[k]-v && sorted[k-1]&1 == 0 {
		best = k - 1
	}
	return sign | sorted[best]
}

func TestFloat16NarrowRoundsToNearestEven(t *testing.T) {
	var bits []uint16
	for h := uint16(0); h < 0x7c00; h++ { // all positive finite values, in increasing order
		bits = append(bits, h)
	}
	vals := make([]float64, len(bits))
	for i, h := range bits {
		vals[i] = float64(FromFloat16(h))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(x float32) {
		if got, want := ToFloat16(x), nearestHalf(bits, vals, x); got != want {
			t.Fatalf("ToFloat16(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		// Exponents across the whole binary16 range and beyond, plus ties built exactly between
		// neighbours, which random draws would almost never hit.
		x := float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(50)-30))
		check(x)
		h := uint16(rng.IntN(0x7bff))
		mid := float32((vals[h] + vals[h+1]) / 2)
		check(mid)
		check(-mid)
	}
	for _, x := range []float32{0, 65504, 65519.99, 65520, 1e10, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 6.1035156e-05} {
		check(x)
		check(-x)
	}
	// RoundFloat16's fast path must agree with the exact conversion everywhere.
	xs := make([]float32, 0, 400000)
	for i := 0; i < 200000; i++ {
		xs = append(xs, float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(50)-30)))
		h := uint16(rng.IntN(0x7bff))
		xs = append(xs, float32((vals[h]+vals[h+1])/2))
	}
	xs = append(xs, 65504, 65519.99, 65520, 6.1035156e-05, 6.1035153e-05, float32(math.Inf(-1)))
	rounded := append([]float32(nil), xs...)
	RoundFloat16(rounded)
	for i, x := range xs {
		if want := FromFloat16(ToFloat16(x)); math.Float32bits(rounded[i]) != math.Float32bits(want) {
			t.Fatalf("RoundFloat16(%g) = %g, want %g", x, rounded[i], want)
		}
	}
	if ToFloat16(float32(math.Inf(1))) != 0x7c00 || ToFloat16(float32(math.Inf(-1))) != 0xfc00 {
		t.Fatal("infinities not preserved")
	}
}
