package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
)

// The NaN scan tests the stored bits of each element type: NaN and both infinities are found
// at their index, the largest finite values are not.
func TestFirstNonFiniteBits(t *testing.T) {
	for _, c := range []struct {
		dtype  DType
		finite []uint16 // largest finite, in both signs
		bad    []uint16 // +Inf, -Inf, a NaN
	}{
		{BF16, []uint16{0x7f7f, 0xff7f}, []uint16{0x7f80, 0xff80, 0x7fc1}},
		{F16, []uint16{0x7bff, 0xfbff}, []uint16{0x7c00, 0xfc00, 0x7e01}},
	} {
		for _, bad := range c.bad {
			var data []byte
			for _, v := range append(slices.Clone(c.finite), bad) {
				data = binary.LittleEndian.AppendUint16(data, v)
			}
			f, err := Parse(fileOf(c.dtype, data))
			if err != nil {
				t.Fatal(err)
			}
			tn, _ := f.Tensor("w")
			if i := tn.FirstNonFinite(); i != 2 {
				t.Errorf("%s %#04x: first non-finite at %d, want 2", c.dtype, bad, i)
			}
			if i := tn.FirstNonFiniteAt(0, 2); i != -1 {
				t.Errorf("%s: largest finite values reported at %d", c.dtype, i)
			}
		}
	}
	var data []byte
	for _, v := range []float32{math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1))} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	f, err := Parse(fileOf(F32, data))
	if err != nil {
		t.Fatal(err)
	}
	if tn, _ := f.Tensor("w"); tn.FirstNonFinite() != 2 {
		t.Errorf("F32: first non-finite at %d, want 2", tn.FirstNonFinite())
	}
}

// fileOf is a safetensors file of one vector "w" of dtype holding data.
func fileOf(dtype DType, data []byte) []byte {
	h := fmt.Sprintf(`{"w":{"dtype":%q,"shape":[%d],"data_offsets":[0,%d]}}`, dtype, len(data)/dtype.Size(), len(data))
	return fileBytes(h, data)
}
