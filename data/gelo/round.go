package gelo

import "math"

// RoundBF16 rounds x to the nearest bfloat16 value (ties to even), returned as float32: what a
// GPU stores when it converts float32 to bf16. NaN stays NaN; values past the largest bf16 become
// infinities; subnormals round like normals (bf16 shares float32's exponent range).
func RoundBF16(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((b | 0x00400000) &^ 0xffff) // quiet NaN, sign kept
	}
	// Adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the dropped
	// half is above the midpoint, or at it with an odd kept value; a carry into the exponent is
	// the correct rounding up to the next binade (or to infinity).
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// RoundFP16 rounds x to the nearest IEEE binary16 value (ties to even), returned as float32:
// subnormal halves (multiples of 2^-24 below 2^-14) are kept, |x| >= 65520 becomes infinity
// (65520 is the tie between 65504 and 65536, which rounds to the even, overflowing side).
func RoundFP16(x float32) float32 {
	b := math.Float32bits(x)
	sign, abs := b&0x80000000, b&0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return math.Float32frombits(b | 0x00400000)
	case abs >= 0x477ff000: // 65520
		return math.Float32frombits(sign | 0x7f800000)
	case abs < 0x38800000: // below 2^-14: a fixed quantum of 2^-24
		v := float64(math.Float32frombits(abs)) * (1 << 24) // exact
		r := math.RoundToEven(v) / (1 << 24)                // exact
		return math.Float32frombits(sign | math.Float32bits(float32(r)))
	}
	// Normal range: keep 10 of float32's 23 fraction bits, rounding as in RoundBF16.
	abs += 0xfff + (abs>>13)&1
	return math.Float32frombits(sign | abs&^0x1fff)
}

// roundSlice rounds every element of x in place to dtype.
func roundSlice(x []float32, dtype ObserveDtype) {
	switch dtype {
	case ObserveBF16:
		for i, v := range x {
			x[i] = RoundBF16(v)
		}
	case ObserveFP16:
		for i, v := range x {
			x[i] = RoundFP16(v)
		}
	}
}
