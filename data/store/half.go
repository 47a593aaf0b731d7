package store

import "math"

// FromFloat16 returns the float32 value of the IEEE 754 binary16 bit pattern h. Every binary16
// value, subnormals and infinities included, is exactly representable in float32.
func FromFloat16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: man * 2^-24, exact in float32.
		return math.Float32frombits(sign | math.Float32bits(float32(man)*(1.0/(1<<24))))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// ToFloat16 rounds f to the nearest binary16 value, ties to even, and returns its bit pattern.
// Values beyond the binary16 range become ±Inf; NaN stays NaN (quiet, sign kept).
func ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 112 // binary16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			// |f| < 2^-25: half the smallest subnormal or less rounds to zero.
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal, which is the right answer
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to +Inf, which is the right answer
	}
	return sign | uint16(h)
}

// RoundFloat16 replaces every value of x by its nearest binary16 value, so that in-memory data
// equals what a float16 store returns for it.
func RoundFloat16(x []float32) {
	for i, v := range x {
		b := math.Float32bits(v)
		// Binary16 normals have float32 exponents 113..142: round the 23-bit mantissa to 10
		// bits, ties to even, in place. A carry into exponent 143 means the value rounds past
		// 65504, which is infinity in binary16; subnormals and specials take the exact path.
		if e := b >> 23 & 0xff; e >= 113 && e <= 142 {
			b += 0xfff + (b>>13)&1
			b &^= 0x1fff
			if b>>23&0xff <= 142 {
				x[i] = math.Float32frombits(b)
				continue
			}
		}
		x[i] = FromFloat16(ToFloat16(v))
	}
}
