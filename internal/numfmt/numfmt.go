// Package numfmt converts between float32 and the two 16-bit floating-point formats that model
// files and GPUs use: IEEE 754 binary16 ("fp16", "half", safetensors F16) and bfloat16 ("bf16",
// the top half of a binary32, safetensors BF16). It is the one definition of these conversions in
// the project: the checkpoint and safetensors readers, the store's float16 columns, the GELO
// sampler's observed dtype and the model writers all call it, so a value rounded in memory is
// bit for bit the value a file holds.
//
// # Policy
//
// Widening (F16ToF32, BF16ToF32) is exact and works on bits only: every 16-bit value, subnormals
// included, is a float32. Signed zeros and infinities keep their sign. A NaN keeps its sign and
// its payload, shifted to the top of the wider fraction; a signalling NaN stays signalling (the
// bits are not passed through the FPU, which could quiet it), so a file's NaN can be reported
// as it was written.
//
// Narrowing (F32ToF16, F32ToBF16) rounds to nearest, ties to even, the IEEE 754 default and what
// GPUs and x86 F16C do when they store float32 as a 16-bit type:
//   - overflow goes to infinity, never saturates: |x| >= 65520 (the midpoint between 65504 and
//     2^16, a tie that goes to the even, infinite side) is ±Inf in fp16, and |x| >= 0x7f7f8000 in
//     float32 bits is ±Inf in bf16;
//   - underflow is gradual: results below the smallest normal are subnormal (fp16 quanta of
//     2^-24, bf16 quanta of 2^-133), nothing is flushed to zero, and a value that rounds to zero
//     keeps its sign;
//   - ±Inf stays ±Inf;
//   - NaN becomes a quiet NaN with the same sign and the top bits of its payload (the quiet bit
//     set, the bits that do not fit dropped), as the hardware conversions do; it never becomes
//     an infinity.
//
// RoundF16 and RoundBF16 are the narrowing followed by the widening, as float32: the value a
// float32 takes after a trip through the 16-bit format.
package numfmt

import (
	"math"
	"math/bits"
)

// F16ToF32 returns the float32 whose value is the binary16 bit pattern h, exactly (see the
// package doc for zeros, infinities and NaN payloads).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN: the payload moves to the top of the wider fraction
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal, frac * 2^-24: a normal float32. Shift the leading one up to the implicit bit
	// (bit 10), lowering the exponent of 2^-14 by one per place shifted.
	n := uint32(bits.LeadingZeros32(frac) - 21)
	return math.Float32frombits(sign | (127-14-n)<<23 | (frac<<n)&0x3ff<<13)
}

// BF16ToF32 returns the float32 whose value is the bfloat16 bit pattern b, exactly: a bfloat16
// is the top half of a binary32.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F32ToF16 rounds f to the nearest binary16, ties to even, and returns its bit pattern (see the
// package doc for overflow, underflow and NaN).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: quiet, with the top 9 bits of the payload
		return sign | 0x7e00 | uint16(abs>>13)&0x1ff
	case abs >= 0x477ff000: // 65520 and above, infinity included
		return sign | 0x7c00
	case abs >= 0x38800000: // 2^-14 and above: a normal binary16
		// Rebias the exponent from 127 to 15, then drop 13 fraction bits: adding 0xfff plus the
		// lowest kept bit carries into the kept bits exactly when the dropped part is above half,
		// or half with an odd kept part. A carry into the exponent is the correct result (the
		// next binade); it cannot reach infinity below 65520.
		r := abs - (127-15)<<23
		r += 0xfff + (r>>13)&1
		return sign | uint16(r>>13)
	case abs > 0x33000000: // above 2^-25: a subnormal binary16, or 2^-14 if it rounds up
		// abs is m * 2^(e-150) with m the 24-bit significand: in units of 2^-24, m >> (126-e).
		e := abs >> 23
		m := abs&0x7fffff | 0x800000
		shift := 126 - e // 14..24
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++ // a carry to 0x400 is the smallest normal, the right answer
		}
		return sign | uint16(h)
	}
	return sign // 2^-25 or less (a tie with zero goes to the even zero)
}

// F32ToBF16 rounds f to the nearest bfloat16, ties to even, and returns its bit pattern (see the
// package doc for overflow, underflow and NaN).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN, sign and top payload bits kept
	}
	// As in F32ToF16: a carry out of the dropped half rounds up, into the exponent when needed
	// (up to infinity from above the largest finite bf16). No finite float32 carries out of 32 bits.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// RoundF16 returns the binary16 value nearest f as a float32: F16ToF32(F32ToF16(f)).
func RoundF16(f float32) float32 {
	b := math.Float32bits(f)
	// Binary16 normals have float32 exponents 113..142: round the fraction to 10 bits in place.
	// A carry to exponent 143 means f rounds past 65504, to infinity, which the exact path
	// returns; subnormals, specials and zeros take it too.
	if e := b >> 23 & 0xff; e >= 113 && e <= 142 {
		r := (b + 0xfff + (b>>13)&1) &^ 0x1fff
		if r>>23&0xff <= 142 {
			return math.Float32frombits(r)
		}
	}
	return F16ToF32(F32ToF16(f))
}

// RoundBF16 returns the bfloat16 value nearest f as a float32: BF16ToF32(F32ToBF16(f)).
func RoundBF16(f float32) float32 {
	return BF16ToF32(F32ToBF16(f))
}

// RoundF16s replaces every element of x by RoundF16 of it, so that data in memory equals what a
// float16 file returns for it.
func RoundF16s(x []float32) {
	for i, v := range x {
		x[i] = RoundF16(v)
	}
}

// RoundBF16s replaces every element of x by RoundBF16 of it.
func RoundBF16s(x []float32) {
	for i, v := range x {
		x[i] = RoundBF16(v)
	}
}

// FirstNonFinite is the index of the first NaN or infinity of x, or -1 when every element is
// finite. Readers use it to refuse weights that a damaged or hostile file made non-finite.
func FirstNonFinite(x []float32) int {
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}
