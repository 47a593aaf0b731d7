package llama

import (
	"fmt"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// DType is the element type a weight is stored in.
type DType uint8

// The element types a model reads weights in.
const (
	F32  DType = iota // IEEE binary32
	F16               // IEEE binary16
	BF16              // bfloat16: the top half of a binary32
)

// Size is the bytes of one element.
func (t DType) Size() int {
	if t == F32 {
		return 4
	}
	return 2
}

// String names the type as safetensors headers do.
func (t DType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// Stored is a weight tensor as a checkpoint file holds it: little-endian elements of DType, e.g.
// a view of a memory-mapped safetensors file. A model made from it keeps reading F16 and BF16
// bytes (F32 ones are copied) and never writes them: they must stay mapped and unchanged while
// it is in use.
type Stored struct {
	DType DType
	Raw   []byte
}

// matrix is a weight matrix (rows, cols), row-major in PyTorch's nn.Linear layout (out, in): as
// float32 values on the heap, or as stored F16/BF16 row blocks (q_proj, k_proj and v_proj
// stacked) converted to float32 when read.
type matrix struct {
	rows, cols int
	f32        []float32 // the whole matrix as float32; nil when it is held as parts
	parts      []rowBlock
}

// rowBlock is rows row0..row0+rows-1 of a matrix, as stored.
type rowBlock struct {
	Stored
	row0, rows int
}

// heapMatrix is a zero matrix of float32s on the heap.
func heapMatrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, f32: make([]float32, rows*cols)}
}

// storedMatrix stacks parts by rows into a (rows, cols) matrix. F32 parts are copied to the heap:
// a file's own F32 bytes would serve without the copy, but GEMMs reading mapped file pages ran 3%
// slower per CPU-second than from heap memory on the Llama-2-7B benchmark shape (10 alternating
// rounds), and a float32 checkpoint takes 4 bytes a parameter either way. F16 and BF16 parts stay
// as stored, converted when read.
func storedMatrix(cols int, parts ...Stored) (matrix, error) {
	w := matrix{cols: cols}
	copied := true
	for _, p := range parts {
		size := p.DType.Size()
		if p.DType > BF16 || len(p.Raw)%(size*cols) != 0 {
			return matrix{}, fmt.Errorf("%d bytes of %s are not whole rows of %d elements", len(p.Raw), p.DType, cols)
		}
		rows := len(p.Raw) / (size * cols)
		w.parts = append(w.parts, rowBlock{Stored: p, row0: w.rows, rows: rows})
		w.rows += rows
		copied = copied && p.DType == F32
	}
	if copied {
		x := make([]float32, w.rows*cols)
		w.convert(0, w.rows, x)
		w.f32, w.parts = x, nil
	}
	return w, nil
}

// converts reports whether reading the matrix converts it (a forward pass goes through a scratch):
// it is held as the file's bytes.
func (w *matrix) converts() bool { return w.f32 == nil && w.rows > 0 }

// convert writes rows lo..hi-1 as float32 into dst (hi-lo, cols). The conversion is exact, so a
// converted row is bit for bit the row a float32 copy of the file would hold.
func (w *matrix) convert(lo, hi int, dst []float32) {
	c := w.cols
	if w.f32 != nil {
		copy(dst[:(hi-lo)*c], w.f32[lo*c:hi*c])
		return
	}
	for _, p := range w.parts {
		a, b := max(lo, p.row0), min(hi, p.row0+p.rows)
		if a >= b {
			continue
		}
		decode(p.Stored, (a-p.row0)*c, dst[(a-lo)*c:(b-lo)*c])
	}
}

// decode converts elements first.. of s into dst (numfmt's little-endian decoders).
func decode(s Stored, first int, dst []float32) {
	size := s.DType.Size()
	raw := s.Raw[size*first : size*(first+len(dst))]
	switch s.DType {
	case F32:
		numfmt.F32sFromLE(dst, raw)
	case BF16:
		numfmt.BF16sFromLE(dst, raw)
	case F16:
		numfmt.F16sFromLE(dst, raw)
	}
}

// vector converts a stored gain or bias of n elements to float32.
func vector(s Stored, n int) ([]float32, error) {
	if s.DType > BF16 || len(s.Raw) != n*s.DType.Size() {
		return nil, fmt.Errorf("%d bytes of %s: want %d elements", len(s.Raw), s.DType, n)
	}
	out := make([]float32, n)
	decode(s, 0, out)
	return out, nil
}
