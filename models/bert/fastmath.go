package bert

import "math"

// Float32 replacements for math.Erf and math.Exp in the encoder's inner loops, where the float64
// library calls cost as much as the matrix products. Both are accurate to a few float32 ulps, far
// below the fp16 rounding of the stored hidden states (see TestFastMath for the bounds).

// GELU table: exact values x/2 (1 + erf(x/sqrt 2)) at nodes geluLo + i/geluScale, interpolated
// linearly. The interpolation error is at most h^2/8 max|GELU”| = 0.8/(8*1024^2) < 1e-7.
const (
	geluLo    = -10.0
	geluHi    = 10.0
	geluScale = 1024.0
)

// geluTab is filled once at package initialisation and only read afterwards.
var geluTab = func() []float32 {
	n := int((geluHi-geluLo)*geluScale) + 2
	t := make([]float32, n)
	for i := range t {
		x := geluLo + float64(i)/geluScale
		t[i] = float32(0.5 * x * (1 + math.Erf(x/math.Sqrt2)))
	}
	return t
}()

// gelu is the exact (erf) GELU, x * Phi(x) = x/2 (1 + erf(x/sqrt 2)), BERT's "gelu" activation,
// read from geluTab. Outside [-10, 10) it is 0 or x to within 1e-22 relative.
func gelu(x float32) float32 {
	if x < geluLo {
		return 0
	}
	if x >= geluHi {
		return x
	}
	// float64 keeps the cell position exact; float32 would lose 2^-9 of a cell near the top.
	t := (float64(x) - geluLo) * geluScale
	i := int(t)
	f := float32(t - float64(i))
	a, b := geluTab[i], geluTab[i+1]
	return a + f*(b-a)
}

// exp32 approximates e^x for x <= 0 (softmax after subtracting the maximum) with relative error
// below 3e-7: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-7 Taylor polynomial, times 2^n.
// Results below the smallest normal float32 flush to 0.
func exp32(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	n := float32(math.Round(float64(x * math.Log2E)))
	// ln 2 split in two so that n*ln2Hi is exact for the n that occur here.
	const ln2Hi, ln2Lo = 0.693145751953125, 1.428606765330187e-06
	r := x - n*ln2Hi - n*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
