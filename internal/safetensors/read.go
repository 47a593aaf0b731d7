package safetensors

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// MaxHeader is the largest header length the format allows, the reference implementation's limit.
const MaxHeader = 100_000_000

// MetadataKey is the header key of the metadata map; no tensor may have this name.
const MetadataKey = "__metadata__"

// Info is one tensor's row of a header: its name, dtype, shape and the byte range
// [Begin, End) of the data section that holds it.
type Info struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int
}

// Tensor is a validated tensor of a file, still in its file encoding. Its bytes belong to the
// file: they are valid until the File is closed.
type Tensor struct {
	Info
	raw []byte
}

// NumElements is the number of elements of t (1 for a scalar, whose shape is empty).
func (t Tensor) NumElements() int {
	if s := t.DType.Size(); s > 0 {
		return len(t.raw) / s
	}
	return 0
}

// Bytes is t's data as the file stores it (little-endian elements of t.DType).
func (t Tensor) Bytes() []byte { return t.raw }

// Float32s converts t (F32, F16 or BF16) into dst, which must have t's element count. The
// conversion is exact and works on bits: NaN payloads, infinities and subnormals come through as
// stored (see internal/numfmt).
func (t Tensor) Float32s(dst []float32) error {
	if n := t.NumElements(); len(dst) != n {
		return fmt.Errorf("tensor %q: %d elements, destination holds %d", t.Name, n, len(dst))
	}
	return t.Float32sAt(0, dst)
}

// Float32sAt converts elements first, first+1, ... of t (F32, F16 or BF16) into dst, so that a
// large tensor can be read in parts, a row at a time.
func (t Tensor) Float32sAt(first int, dst []float32) error {
	if !t.DType.float() {
		return fmt.Errorf("tensor %q: dtype %s: want F32, F16 or BF16", t.Name, t.DType)
	}
	if n := t.NumElements(); first < 0 || first > n || len(dst) > n-first {
		return fmt.Errorf("tensor %q: elements [%d, %d) out of its %d", t.Name, first, first+len(dst), n)
	}
	size := t.DType.Size()
	raw := t.raw[first*size : (first+len(dst))*size]
	switch t.DType {
	case F32:
		numfmt.F32sFromLE(dst, raw)
	case F16:
		numfmt.F16sFromLE(dst, raw)
	case BF16:
		numfmt.BF16sFromLE(dst, raw)
	}
	return nil
}

// FirstNonFinite is the index of t's first NaN or infinity, or -1 when every element is finite
// (or t is not F32, F16 or BF16). It tests the stored bits, an all-ones exponent, without
// converting, so a multi-gigabyte weight is scanned at the speed it is read.
func (t Tensor) FirstNonFinite() int { return t.FirstNonFiniteAt(0, t.NumElements()) }

// FirstNonFiniteAt is FirstNonFinite over elements lo..hi-1 (clamped to the tensor), so that
// parts of one tensor can be scanned in parallel; the index is within the whole tensor.
func (t Tensor) FirstNonFiniteAt(lo, hi int) int {
	lo, hi = max(lo, 0), min(hi, t.NumElements())
	switch t.DType {
	case F32:
		raw := t.raw[4*lo : 4*max(hi, lo)]
		for i := 0; i+4 <= len(raw); i += 4 {
			if binary.LittleEndian.Uint32(raw[i:])&0x7f800000 == 0x7f800000 {
				return lo + i/4
			}
		}
	case F16, BF16:
		mask := uint16(0x7c00) // binary16: 5 exponent bits
		if t.DType == BF16 {
			mask = 0x7f80 // bfloat16: float32's 8
		}
		raw := t.raw[2*lo : 2*max(hi, lo)]
		for i := 0; i+2 <= len(raw); i += 2 {
			if binary.LittleEndian.Uint16(raw[i:])&mask == mask {
				return lo + i/2
			}
		}
	}
	return -1
}

// File is a parsed safetensors file. Its tensors' bytes point into the file's memory; Close
// releases it (a mapped file is unmapped).
type File struct {
	header   []byte
	metadata map[string]string
	tensors  []Tensor
	byName   map[string]int
	release  func() error
}

// Metadata is the file's "__metadata__" map, empty (not nil) when it has none. The map belongs
// to the file; callers must not change it.
func (f *File) Metadata() map[string]string { return f.metadata }

// Tensors is every tensor of the file in data order (by data_offsets; ties, which only empty
// tensors can have, by size and then name).
func (f *File) Tensors() []Tensor { return f.tensors }

// Tensor is the tensor named name, and whether the file has it.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Header is the JSON header as the file stores it, padding included.
func (f *File) Header() []byte { return f.header }

// Close releases the file's memory; its tensors' bytes must not be used afterwards. Closing
// twice is harmless.
func (f *File) Close() error {
	if f.release == nil {
		return nil
	}
	release := f.release
	f.release, f.tensors, f.byName, f.header = nil, nil, nil, nil
	return release()
}

// Parse validates buf as a whole safetensors file (see the package doc) and returns its tensors,
// which point into buf. Errors do not name a file: Open adds the path.
func Parse(buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, errShort(len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes that follow it (truncated, or not safetensors)", n, len(buf)-8)
	}
	if n > MaxHeader {
		return nil, fmt.Errorf("header length %d exceeds the format's limit of %d bytes", n, MaxHeader)
	}
	header, data := buf[8:8+n], buf[8+n:]
	infos, meta, err := parseHeader(header)
	if err != nil {
		return nil, err
	}
	tensors := make([]Tensor, len(infos))
	for i, info := range infos {
		if info.End > len(data) {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the %d bytes of data (truncated file?)", info.Name, info.Begin, info.End, len(data))
		}
		tensors[i] = Tensor{Info: info, raw: data[info.Begin:info.End]}
	}
	if err := checkTiling(tensors, len(data)); err != nil {
		return nil, err
	}
	byName := make(map[string]int, len(tensors))
	for i, t := range tensors {
		byName[t.Name] = i
	}
	return &File{header: header, metadata: meta, tensors: tensors, byName: byName, release: func() error { return nil }}, nil
}

// errShort is the error for a file of n < 8 bytes.
func errShort(n int) error {
	return fmt.Errorf("file is %d bytes, shorter than the 8-byte header length (truncated, or not safetensors)", n)
}

// checkTiling sorts tensors into data order and checks that they cover the data section of
// dataLen bytes exactly: no gap, no overlap, nothing after the last.
func checkTiling(tensors []Tensor, dataLen int) error {
	slices.SortFunc(tensors, func(a, b Tensor) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End), strings.Compare(a.Name, b.Name))
	})
	pos, prev := 0, ""
	for _, t := range tensors {
		switch {
		case t.Begin < pos:
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d", t.Name, t.Begin, t.End, prev, pos)
		case t.Begin > pos:
			return fmt.Errorf("data bytes [%d, %d) before tensor %q belong to no tensor", pos, t.Begin, t.Name)
		}
		pos, prev = t.End, t.Name
	}
	if pos != dataLen {
		return fmt.Errorf("data section has %d bytes but its tensors cover only %d", dataLen, pos)
	}
	return nil
}
