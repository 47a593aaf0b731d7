package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// Spec is a tensor to write: its name, the dtype the file stores it in (F32, F16 or BF16) and its
// shape.
type Spec struct {
	Name  string
	DType DType
	Shape []int
}

// Layout is the table of a file holding specs back to back in the order given, each tensor's
// byte range following the last. It refuses names the header cannot carry (empty, reserved,
// invalid UTF-8, given twice), dtypes other than F32, F16 and BF16, and shapes with a negative
// dimension or more bytes than an int can count.
func Layout(specs []Spec) ([]Info, error) {
	table := make([]Info, len(specs))
	seen := make(map[string]bool, len(specs))
	off := 0
	for i, s := range specs {
		if err := checkName(s.Name); err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("tensor %q appears twice", s.Name)
		}
		seen[s.Name] = true
		if !s.DType.float() {
			return nil, fmt.Errorf("tensor %q: dtype %q: the writer stores F32, F16 or BF16", s.Name, s.DType)
		}
		n, err := NumElements(s.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", s.Name, err)
		}
		size := s.DType.Size()
		if n > (math.MaxInt-off)/size {
			return nil, fmt.Errorf("tensor %q: shape %v: the file would hold more bytes than an int can count", s.Name, s.Shape)
		}
		table[i] = Info{Name: s.Name, DType: s.DType, Shape: s.Shape, Begin: off, End: off + n*size}
		off += n * size
	}
	return table, nil
}

// Writer writes one safetensors file: NewWriter writes the header, WriteTensor each tensor's data
// in the order of the specs, and Close checks that none was left out.
type Writer struct {
	w     io.Writer
	table []Info
	next  int    // index of the next tensor to write
	buf   []byte // encoding buffer, reused across tensors
}

// NewWriter validates specs (see Layout) and metadata (valid UTF-8), then writes the header
// length and the header, padded with spaces to a multiple of 8 bytes as the reference writer
// does. Nothing is written when validation fails.
func NewWriter(w io.Writer, metadata map[string]string, specs []Spec) (*Writer, error) {
	table, err := Layout(specs)
	if err != nil {
		return nil, err
	}
	header, err := EncodeHeader(metadata, table)
	if err != nil {
		return nil, err
	}
	header = Pad(header)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	if _, err := w.Write(n[:]); err != nil {
		return nil, err
	}
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	return &Writer{w: w, table: table}, nil
}

// Pad appends spaces to header up to a multiple of 8 bytes, the padding the writer uses.
func Pad(header []byte) []byte {
	for len(header)%8 != 0 {
		header = append(header, ' ')
	}
	return header
}

// WriteTensor writes the next tensor's elements, rounded to its dtype (to nearest, ties to even:
// see internal/numfmt). x must hold exactly the tensor's element count.
func (w *Writer) WriteTensor(x []float32) error {
	if w.next == len(w.table) {
		return fmt.Errorf("write: all %d tensors are already written", len(w.table))
	}
	t := w.table[w.next]
	size := t.DType.Size()
	if n := (t.End - t.Begin) / size; len(x) != n {
		return fmt.Errorf("tensor %q: shape %v has %d elements but data has %d", t.Name, t.Shape, n, len(x))
	}
	w.next++
	const chunk = 1 << 16 // bytes encoded per write
	if w.buf == nil {
		w.buf = make([]byte, 0, chunk)
	}
	for len(x) > 0 {
		part := x[:min(len(x), chunk/size)]
		x = x[len(part):]
		buf := w.buf[:0]
		switch t.DType {
		case F32:
			for _, v := range part {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		case F16:
			for _, v := range part {
				buf = binary.LittleEndian.AppendUint16(buf, numfmt.F32ToF16(v))
			}
		case BF16:
			for _, v := range part {
				buf = binary.LittleEndian.AppendUint16(buf, numfmt.F32ToBF16(v))
			}
		}
		if _, err := w.w.Write(buf); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// Close reports a tensor that was never written (the file would be truncated). It does not close
// the underlying writer.
func (w *Writer) Close() error {
	if w.next < len(w.table) {
		return fmt.Errorf("write: tensor %q and %d after it not written", w.table[w.next].Name, len(w.table)-w.next-1)
	}
	return nil
}
