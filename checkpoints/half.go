package checkpoints

// f16ToF32Bits widens an IEEE 754 binary16 to binary32 bits. Every binary16 value is exactly
// representable, so this is exact; NaN payloads are kept (shifted into the top of the wider
// mantissa), which an arithmetic conversion would not promise.
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return sign | 0x7f800000 | mant<<13
	case exp != 0: // normal: rebias 15 -> 127
		return sign | (exp+127-15)<<23 | mant<<13
	case mant == 0: // signed zero
		return sign
	}
	// Subnormal: mant * 2^-24 is a normal float32; shift the leading one up to the implicit bit,
	// lowering the exponent from that of 2^-14 by one per shift.
	e := uint32(127 - 14)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}

// bf16ToF32Bits widens a bfloat16, which is the top half of a binary32.
func bf16ToF32Bits(b uint16) uint32 {
	return uint32(b) << 16
}
