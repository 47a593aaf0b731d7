package safetensors

import (
	"fmt"
	"math"
)

// DType is an element type as a safetensors header spells it ("F32", "BF16", ...).
type DType string

// The element types this package converts to and from float32. A file may hold any dtype of the
// format (see Size); only these three can be read as or written from float32.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// sizes is the byte size of every whole-byte dtype of the format. The sub-byte dtypes the
// reference implementation added later (F4, F6_*) are not listed: a header naming them is
// refused as an unknown dtype, since no tensor here could use them.
var sizes = map[DType]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, F16: 2, BF16: 2,
	"I32": 4, "U32": 4, F32: 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Size is the number of bytes of one element of d, or 0 when d is not a dtype of the format.
func (d DType) Size() int { return sizes[d] }

// float reports whether d converts to and from float32 here.
func (d DType) float() bool { return d == F32 || d == F16 || d == BF16 }

// NumElements is the product of shape, refusing negative dimensions and a product that overflows
// an int. A zero dimension makes the product zero, but the other dimensions must still multiply
// without overflow, so that no later computation on the shape can wrap.
func NumElements(shape []int) (int, error) {
	n, nonzero := 1, 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d == 0 {
			n = 0
			continue
		}
		if nonzero > math.MaxInt/d {
			return 0, fmt.Errorf("shape %v has more elements than an int can count", shape)
		}
		nonzero *= d
	}
	if n == 0 {
		return 0, nil
	}
	return nonzero, nil
}
