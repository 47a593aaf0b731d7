package gelo

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestRoundKnownValues(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	inf := float32(math.Inf(1))
	fp16 := []struct{ in, want float32 }{
		{1, 1},
		{1 + p(-11), 1},                   // tie, 1 is even
		{1 + 3*p(-11), 1 + p(-9)},         // tie, rounds up to the even neighbour
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
		{float32(math.Float32frombits(1)), 0}, // float32 subnormal
		{0.1, 0.0999755859375},
	}
	for _, c := range fp16 {
		if got := RoundFP16(c.in); got != c.want {
			t.Errorf("RoundFP16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	if got := RoundFP16(float32(math.Copysign(0, -1))); math.Float32bits(got) != 0x80000000 {
		t.Errorf("RoundFP16(-0) = %v, sign lost", got)
	}
	bf16 := []struct{ in, want float32 }{
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
	}
	for _, c := range bf16 {
		if got := RoundBF16(c.in); got != c.want {
			t.Errorf("RoundBF16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	nan := float32(math.NaN())
	if !math.IsNaN(float64(RoundBF16(nan))) || !math.IsNaN(float64(RoundFP16(nan))) {
		t.Error("NaN not kept")
	}
	if RoundBF16(inf) != inf || RoundFP16(-inf) != -inf {
		t.Error("infinity not kept")
	}
}

// grid is every finite non-negative value of a 16-bit format, ascending, plus its infinity (as the
// next power of two), each with its bit pattern: the reference rounds by search in it.
type grid struct {
	vals []float64
	bits []uint16
}

func fp16Grid() grid {
	var g grid
	for b := uint16(0); b <= 0x7c00; b++ {
		e, m := int(b>>10), float64(b&0x3ff)
		v := m * math.Ldexp(1, -24)
		if e > 0 {
			v = (1024 + m) * math.Ldexp(1, e-25)
		}
		g.vals, g.bits = append(g.vals, v), append(g.bits, b)
	}
	return g
}

func bf16Grid() grid {
	var g grid
	for b := uint16(0); b <= 0x7f80; b++ {
		v := float64(math.Float32frombits(uint32(b) << 16))
		if b == 0x7f80 {
			v = math.Ldexp(1, 128)
		}
		g.vals, g.bits = append(g.vals, v), append(g.bits, b)
	}
	return g
}

// nearest rounds |x| to the grid, ties to the even bit pattern; the last grid value is infinity.
func (g grid) nearest(x float32) float32 {
	a := math.Abs(float64(x))
	i := sort.SearchFloat64s(g.vals, a)
	var v float64
	switch {
	case i == len(g.vals):
		i = len(g.vals) - 1
		v = g.vals[i]
	case i == 0 || g.vals[i] == a:
		v = g.vals[i]
	default:
		lo, hi := g.vals[i-1], g.vals[i]
		switch {
		case a-lo < hi-a:
			v, i = lo, i-1
		case a-lo > hi-a:
			v = hi
		case g.bits[i-1]%2 == 0:
			v, i = lo, i-1
		default:
			v = hi
		}
	}
	if i == len(g.vals)-1 {
		v = math.Inf(1)
	}
	return float32(math.Copysign(v, float64(x)))
}

func TestRoundMatchesNearestEvenReference(t *testing.T) {
	for _, f := range []struct {
		name  string
		round func(float32) float32
		g     grid
	}{{"fp16", RoundFP16, fp16Grid()}, {"bf16", RoundBF16, bf16Grid()}} {
		check := func(x float32) {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return
			}
			if got, want := f.round(x), f.g.nearest(x); got != want {
				t.Fatalf("%s(%g = %#08x) = %g, reference %g", f.name, x, math.Float32bits(x), got, want)
			}
		}
		// Every midpoint between neighbours (representable in float32) and its float32 neighbours.
		for i := 1; i < len(f.g.vals); i++ {
			mid := float32((f.g.vals[i-1] + f.g.vals[i]) / 2)
			for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), float32(f.g.vals[i])} {
				check(x)
				check(-x)
			}
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < 200000; i++ {
			check(math.Float32frombits(rng.Uint32()))
		}
	}
}
