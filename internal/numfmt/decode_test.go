package numfmt

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The in-place path (aligned) and the byte path (offset by one) decode every element to the bits
// the scalar widenings give, for float32, bfloat16 and binary16 words, NaNs and subnormals among them.
func TestDecodersMatchScalarWidening(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 257
	words := make([]uint32, n)
	for i := range words {
		words[i] = rng.Uint32()
	}
	words[0], words[1], words[2] = 0x7fc00001, 0x00000001, 0x80000000 // NaN with payload, subnormal, -0
	for _, off := range []int{0, 1} {
		buf32 := make([]byte, 4*n+off)
		buf16 := make([]byte, 2*n+off)
		for i, w := range words {
			binary.LittleEndian.PutUint32(buf32[off+4*i:], w)
			binary.LittleEndian.PutUint16(buf16[off+2*i:], uint16(w))
		}
		got := make([]float32, n)
		F32sFromLE(got, buf32[off:])
		for i, w := range words {
			if math.Float32bits(got[i]) != w {
				t.Fatalf("offset %d: F32 element %d: %#x, want %#x", off, i, math.Float32bits(got[i]), w)
			}
		}
		for name, c := range map[string]struct {
			decode func([]float32, []byte)
			widen  func(uint16) float32
		}{"BF16": {BF16sFromLE, BF16ToF32}, "F16": {F16sFromLE, F16ToF32}} {
			c.decode(got, buf16[off:])
			for i, w := range words {
				if want := c.widen(uint16(w)); math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("offset %d: %s element %d: %#x, want %#x", off, name, i, math.Float32bits(got[i]), math.Float32bits(want))
				}
			}
		}
	}
}
