package numfmt

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// The references below compute from the definitions of the formats in float64, where every
// float32 and every 16-bit value is exact, with none of the bit manipulation of the code under
// test: a value's quantum is found from its exponent (math.Frexp), the quotient rounded with
// math.RoundToEven, and bit patterns are built from the value.

// format describes a binary floating-point format by its precision (significand bits, the
// implicit one included) and its exponent range.
type format struct {
	name       string
	precision  int // 11 for binary16, 8 for bfloat16
	emin, emax int // exponents of the smallest and largest normal binade
	expBits    int
}

var (
	fp16 = format{"fp16", 11, -14, 15, 5}
	bf16 = format{"bf16", 8, -126, 127, 8}
)

// value is the value of the 16-bit pattern h (NaN for a NaN pattern) by the format's definition.
func (f format) value(h uint16) float64 {
	fracBits := f.precision - 1
	exp := int(h>>fracBits) & (1<<f.expBits - 1)
	frac := float64(h & (1<<fracBits - 1))
	bias := f.emax
	var v float64
	switch {
	case exp == 1<<f.expBits-1 && frac != 0:
		return math.NaN()
	case exp == 1<<f.expBits-1:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(frac, f.emin-fracBits)
	default:
		v = math.Ldexp(1+frac/math.Ldexp(1, fracBits), exp-bias)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// round is x rounded to the format, to nearest with ties to even, overflowing to infinity.
func (f format) round(x float32) float64 {
	v := float64(x)
	a := math.Abs(v)
	if a == 0 || math.IsInf(a, 0) {
		return v
	}
	_, e := math.Frexp(a) // a = m * 2^e, m in [0.5, 1): the leading bit has weight 2^(e-1)
	lead := max(e-1, f.emin)
	q := math.Ldexp(1, lead-(f.precision-1))
	r := math.RoundToEven(a/q) * q // both steps exact
	if r >= math.Ldexp(1, f.emax+1) {
		r = math.Inf(1)
	}
	return math.Copysign(r, v)
}

// bits is the pattern of a value of the format (not NaN).
func (f format) bits(v float64) uint16 {
	fracBits := f.precision - 1
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
	}
	a := math.Abs(v)
	switch {
	case math.IsInf(a, 0):
		return sign | uint16(1<<f.expBits-1)<<fracBits
	case a < math.Ldexp(1, f.emin): // subnormal or zero: a count of the smallest quantum
		return sign | uint16(a/math.Ldexp(1, f.emin-fracBits))
	}
	_, e := math.Frexp(a)
	frac := (a/math.Ldexp(1, e-1) - 1) * math.Ldexp(1, fracBits)
	return sign | uint16(e-1+f.emax)<<fracBits | uint16(frac)
}

func isNaN32(b uint32) bool { return b&0x7fffffff > 0x7f800000 }

// TestWidenAllPatterns checks every one of the 65536 patterns of each format against its value
// by the definition, bit for bit (so the sign of zero counts), and NaN patterns against the
// documented payload rule.
func TestWidenAllPatterns(t *testing.T) {
	for _, c := range []struct {
		f     format
		widen func(uint16) float32
		shift uint // where the 16-bit fraction lands in the float32 fraction
	}{{fp16, F16ToF32, 13}, {bf16, BF16ToF32, 16}} {
		fracMask := uint32(1)<<(c.f.precision-1) - 1
		for i := range 1 << 16 {
			h := uint16(i)
			got := math.Float32bits(c.widen(h))
			want := c.f.value(h)
			if math.IsNaN(want) {
				wantBits := uint32(h&0x8000)<<16 | 0x7f800000 | (uint32(h)&fracMask)<<c.shift
				if got != wantBits {
					t.Fatalf("%s %#04x: NaN widened to %#08x, want sign and payload kept: %#08x", c.f.name, h, got, wantBits)
				}
				continue
			}
			if got != math.Float32bits(float32(want)) || float64(math.Float32frombits(got)) != want {
				t.Fatalf("%s %#04x: widened to %#08x (%g), want %g", c.f.name, h, got, math.Float32frombits(got), want)
			}
		}
	}
}

// TestNarrowInvertsWiden: every 16-bit value survives float32 and back; a NaN comes back quiet.
func TestNarrowInvertsWiden(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		want16, wantBF := h, h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want16 = h | 0x200
		}
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			wantBF = h | 0x40
		}
		if got := F32ToF16(F16ToF32(h)); got != want16 {
			t.Fatalf("fp16 %#04x: back as %#04x, want %#04x", h, got, want16)
		}
		if got := F32ToBF16(BF16ToF32(h)); got != wantBF {
			t.Fatalf("bf16 %#04x: back as %#04x, want %#04x", h, got, wantBF)
		}
	}
}

// checkNarrow compares the narrowing and rounding of x in both formats with the references.
func checkNarrow(t *testing.T, x float32) {
	t.Helper()
	b := math.Float32bits(x)
	for _, c := range []struct {
		f      format
		narrow func(float32) uint16
		round  func(float32) float32
		widen  func(uint16) float32
	}{{fp16, F32ToF16, RoundF16, F16ToF32}, {bf16, F32ToBF16, RoundBF16, BF16ToF32}} {
		got := c.narrow(x)
		var want uint16
		if isNaN32(b) {
			// Quiet NaN, sign and the top payload bits kept.
			fracBits := uint(c.f.precision - 1)
			exp := uint16(1<<c.f.expBits-1) << fracBits
			quiet := uint16(1) << (fracBits - 1)
			want = uint16(b>>16)&0x8000 | exp | quiet | uint16(b&0x7fffff>>(23-fracBits))
		} else {
			want = c.f.bits(c.f.round(x))
		}
		if got != want {
			t.Fatalf("%s: narrow %#08x (%g) = %#04x, want %#04x", c.f.name, b, x, got, want)
		}
		if r, w := math.Float32bits(c.round(x)), math.Float32bits(c.widen(want)); r != w {
			t.Fatalf("%s: round %#08x (%g) = %#08x, want %#08x", c.f.name, b, x, r, w)
		}
	}
}

// edgeInputs is every float32 exponent with fractions at and around each bit position (so every
// rounding boundary of both formats, normal and subnormal, is met as a tie, just below and just
// above it, with odd and even kept parts), both signs, plus zeros, infinities and NaNs.
func edgeInputs() []uint32 {
	var fracs []uint32
	for k := range 23 {
		p := uint32(1) << k
		fracs = append(fracs, p, p-1, p+1, p|p<<1, p|p<<1-1, p|p<<1+1, 0x7fffff&^(p-1), 0x7fffff^p)
	}
	fracs = append(fracs, 0, 0x7fffff, 0x400000, 0x3fffff, 0x7ffffe, 0x1000, 0x3000, 0x8000, 0x18000)
	var out []uint32
	for e := range uint32(256) {
		for _, f := range fracs {
			b := e<<23 | f&0x7fffff
			out = append(out, b, b|0x80000000)
		}
	}
	return out
}

func TestNarrowEdges(t *testing.T) {
	inputs := edgeInputs()
	for _, b := range inputs {
		checkNarrow(t, math.Float32frombits(b))
	}
	// Every midpoint between neighbouring 16-bit values and the float32s either side of it.
	for _, f := range []format{fp16, bf16} {
		for h := uint16(0); h < 0x7fff; h++ {
			lo, hi := f.value(h), f.value(h+1)
			if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) {
				continue
			}
			if math.IsInf(hi, 0) {
				hi = math.Ldexp(1, f.emax+1) // the overflow threshold is the midpoint to 2^(emax+1)
			}
			mid := float32((lo + hi) / 2)
			for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1)))} {
				checkNarrow(t, x)
				checkNarrow(t, -x)
			}
		}
	}
	t.Logf("%d edge inputs and all midpoints", len(inputs))
}

// TestNarrowRandom is a seeded sweep of four million float32 patterns.
func TestNarrowRandom(t *testing.T) {
	n := 4 << 20
	if testing.Short() {
		n = 1 << 18
	}
	rng := rand.New(rand.NewPCG(16, 32))
	for range n {
		checkNarrow(t, math.Float32frombits(rng.Uint32()))
	}
	// Values near the 16-bit ranges, which uniform bit patterns visit rarely.
	for range n / 4 {
		checkNarrow(t, float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(60)-35)))
	}
}

// TestNarrowExhaustive checks all 2^32 float32 patterns (a few minutes): NUMFMT_EXHAUSTIVE=1.
func TestNarrowExhaustive(t *testing.T) {
	if os.Getenv("NUMFMT_EXHAUSTIVE") == "" {
		t.Skip("set NUMFMT_EXHAUSTIVE=1 to check every float32")
	}
	for b := uint64(0); b < 1<<32; b++ {
		checkNarrow(t, math.Float32frombits(uint32(b)))
	}
}

func TestKnownValues(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	inf := float32(math.Inf(1))
	for _, c := range []struct{ in, want float32 }{
		{1, 1},
		{1 + p(-11), 1},                   // tie, 1 is even
		{1 + 3*p(-11), 1 + p(-9)},         // tie, up to the even neighbour
		{1 + p(-11) + p(-20), 1 + p(-10)}, // just above the tie
		{-(1 + 3*p(-11)), -(1 + p(-9))},
		{65504, 65504},
		{65519.996, 65504},
		{65520, inf}, // tie between 65504 (odd) and 65536 (even, overflow)
		{-70000, -inf},
		{p(-24), p(-24)},          // smallest subnormal
		{p(-25), 0},               // tie with 0
		{3 * p(-25), p(-23)},      // tie, 2 * 2^-24 is even
		{p(-25) + p(-40), p(-24)}, // above the tie
		{p(-14) - p(-25), p(-14)}, // tie between the largest subnormal and the smallest normal
		{p(-14) - 3*p(-25), p(-14) - p(-23)},
		{math.Float32frombits(1), 0}, // float32 subnormal
		{0.1, 0.0999755859375},
	} {
		if got := RoundF16(c.in); got != c.want {
			t.Errorf("RoundF16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, want float32 }{
		{1, 1},
		{1 + p(-8), 1},           // tie, even
		{1 + 3*p(-8), 1 + p(-6)}, // tie, up to even
		{1 + p(-8) + p(-20), 1 + p(-7)},
		{math.MaxFloat32, inf},
		{math.Float32frombits(0x7f7f7fff), math.Float32frombits(0x7f7f0000)},
		{math.Float32frombits(0x7f7f8000), inf},                              // tie, 0x7f80 (inf) is even
		{math.Float32frombits(0x00008000), 0},                                // subnormal tie, to 0
		{math.Float32frombits(0x00018000), math.Float32frombits(0x00020000)}, // subnormal tie, up
		{-3.14159265, -3.140625},
	} {
		if got := RoundBF16(c.in); got != c.want {
			t.Errorf("RoundBF16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   uint32
		f16  uint16
		bf16 uint16
		what string
	}{
		{0x80000000, 0x8000, 0x8000, "-0"},
		{0x80000001, 0x8000, 0x8000, "negative float32 subnormal rounds to -0"},
		{0x7f800000, 0x7c00, 0x7f80, "+Inf"},
		{0xff800000, 0xfc00, 0xff80, "-Inf"},
		{0x7fc00000, 0x7e00, 0x7fc0, "quiet NaN"},
		{0x7f800001, 0x7e00, 0x7fc0, "signalling NaN, low payload: quieted, payload dropped"},
		{0xffa02001, 0xff01, 0xffe0, "negative signalling NaN: sign and top payload bits kept"},
		{0x7fffffff, 0x7fff, 0x7fff, "NaN, all payload bits"},
		{0x3f808000, 0x3c04, 0x3f80, "bf16 tie to even"},
		{0x3f818000, 0x3c0c, 0x3f82, "bf16 tie up to even"},
	} {
		if got := F32ToF16(math.Float32frombits(c.in)); got != c.f16 {
			t.Errorf("F32ToF16(%#08x) (%s) = %#04x, want %#04x", c.in, c.what, got, c.f16)
		}
		if got := F32ToBF16(math.Float32frombits(c.in)); got != c.bf16 {
			t.Errorf("F32ToBF16(%#08x) (%s) = %#04x, want %#04x", c.in, c.what, got, c.bf16)
		}
	}
	for _, c := range []struct {
		f16  uint16
		want uint32
		what string
	}{
		{0x0000, 0x00000000, "+0"},
		{0x8000, 0x80000000, "-0"},
		{0x3c00, 0x3f800000, "1"},
		{0x3555, 0x3eaaa000, "0.333251953125"},
		{0x7bff, 0x477fe000, "65504, the largest finite"},
		{0x0400, 0x38800000, "2^-14, the smallest normal"},
		{0x0001, 0x33800000, "2^-24, the smallest subnormal"},
		{0x8001, 0xb3800000, "-2^-24"},
		{0x0200, 0x38000000, "2^-15, a subnormal"},
		{0x03ff, 0x387fc000, "1023 * 2^-24, the largest subnormal"},
		{0x7c01, 0x7f802000, "signalling NaN stays signalling, payload 1"},
		{0xfe01, 0xffc02000, "negative quiet NaN with payload"},
	} {
		if got := math.Float32bits(F16ToF32(c.f16)); got != c.want {
			t.Errorf("F16ToF32(%#04x) (%s) = %#08x, want %#08x", c.f16, c.what, got, c.want)
		}
	}
}

// The slice forms are the scalar forms element by element.
func TestRoundSlices(t *testing.T) {
	inputs := edgeInputs()
	x := make([]float32, len(inputs))
	for i, b := range inputs {
		x[i] = math.Float32frombits(b)
	}
	a, b := append([]float32(nil), x...), append([]float32(nil), x...)
	RoundF16s(a)
	RoundBF16s(b)
	for i, v := range x {
		if math.Float32bits(a[i]) != math.Float32bits(RoundF16(v)) || math.Float32bits(b[i]) != math.Float32bits(RoundBF16(v)) {
			t.Fatalf("element %d (%#08x): slice %#08x %#08x", i, inputs[i], math.Float32bits(a[i]), math.Float32bits(b[i]))
		}
	}
}

func TestFirstNonFinite(t *testing.T) {
	for _, c := range []struct {
		x    []float32
		want int
	}{
		{nil, -1},
		{[]float32{0, math.MaxFloat32, -math.SmallestNonzeroFloat32}, -1},
		{[]float32{1, float32(math.Inf(-1)), float32(math.NaN())}, 1},
		{[]float32{1, 2, math.Float32frombits(0x7f800001)}, 2},
	} {
		if got := FirstNonFinite(c.x); got != c.want {
			t.Errorf("FirstNonFinite(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func BenchmarkRoundF16(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i) * 0.37
	}
	for b.Loop() {
		RoundF16s(x)
	}
}
