package cpu

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestTileGemmMatchesGo: both assembly register blocks (eight and sixteen lanes) give the bits
// of the Go loop (the same FMA chains in the same order) on shapes with partial row blocks, one
// to three column blocks (the sixteen-lane kernel's pairs and odd block), k from 0 to 33, A
// row-major or transposed (ars = 1), alpha 1 and not, overwriting and accumulating, and leave
// C's other elements alone.
func TestTileGemmMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: tileGemm is not used")
	}
	defer func(was bool) { hasAVX512 = was }(hasAVX512)
	kernels := []bool{false}
	if hasAVX512 {
		kernels = append(kernels, true)
	} else {
		t.Log("no AVX-512: the sixteen-lane kernel is not tested")
	}
	for _, wide := range kernels {
		hasAVX512 = wide
		testTileGemmMatchesGo(t, wide)
	}
}

func testTileGemmMatchesGo(t *testing.T, wide bool) {
	rng := rand.New(rand.NewPCG(41, 1))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	for _, m := range []int{1, 5, 6, 7, 13, 18} {
		for _, n := range []int{16, 32, 48, 64} {
			for _, k := range []int{0, 1, 7, 32, 33} {
				for _, trans := range []bool{false, true} {
					for _, acc := range []bool{false, true} {
						for _, alpha := range []float32{1, 0.17677669} {
							mr := roundUp(m, tileRows)
							ars, aps, alen := k+3, 1, mr*(k+3)
							if trans {
								ars, aps, alen = 1, mr+2, max(k, 1)*(mr+2)
							}
							a, b := fill(alen), fill(max(k, 1)*(n+5))
							ldc := n + 7
							c := fill(m*ldc + 3)
							want := append([]float32(nil), c...)
							tileGemm(m, n, k, alpha, a, ars, aps, b, n+5, acc, c, ldc, make([]float32, tileRows*n))
							tileGemmGo(m, n, k, alpha, a, ars, aps, b, n+5, acc, want, ldc)
							for i := range c {
								if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
									t.Fatalf("AVX-512 %v, m %d n %d k %d trans %v acc %v alpha %g: c[%d] = %g, want %g",
										wide, m, n, k, trans, acc, alpha, i, c[i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestFMA32 checks the reference's single-rounding a*b + c against big.Float's exact sum rounded
// to float32, on random operands, on sums that nearly cancel, and on a double-rounding trap:
// a*b + c = (1 + 2^-23) + 2^-24 - 2^-70, which float64 rounds onto the float32 tie
// 1 + 2^-23 + 2^-24 and then (ties to even) up, where the exact sum rounds down.
func TestFMA32(t *testing.T) {
	a := math.Float32frombits(uint32(127-24)<<23 | 1) // 2^-24 (1 + 2^-23)
	b := math.Float32frombits(0x3f7ffffe)             // 1 - 2^-23
	c := math.Float32frombits(0x3f800001)             // 1 + 2^-23
	for _, sign := range []float32{1, -1} {
		if got, want := fma32(sign*a, b, sign*c), sign*c; got != want {
			t.Fatalf("double-rounding trap: fma32 = %x, want %x", math.Float32bits(got), math.Float32bits(want))
		}
		if naive := float32(math.FMA(float64(sign*a), float64(b), float64(sign*c))); naive == sign*c {
			t.Fatal("the trap is no trap: rounding through float64 got it right")
		}
	}
	rng := rand.New(rand.NewPCG(41, 2))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	for i := range 200000 {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		c := float32(rng.NormFloat64())
		if i%2 == 1 {
			// c cancels most of a*b, leaving a sum whose low bits sit at a float32 tie.
			c = -float32(float64(a) * float64(b))
			c = math.Float32frombits(math.Float32bits(c) ^ uint32(rng.IntN(4)))
		}
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}
