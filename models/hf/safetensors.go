package hf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"syscall"

	"github.com/gelo-research/geloattack/data/store"
)

// Element types of safetensors tensors this package reads and writes.
const (
	F32  = "F32"
	F16  = "F16"
	BF16 = "BF16"
)

// maxHeader bounds the JSON header (the format's own limit is 100 MB).
const maxHeader = 100 << 20

// tensorInfo is one header entry; begin and end are byte offsets into the data section.
type tensorInfo struct {
	name       string
	dtype      string
	shape      []int
	begin, end int
}

// shard is one mapped safetensors file.
type shard struct {
	path    string
	mem     []byte // the whole file, mapped read-only
	data    []byte // mem after the header
	tensors map[string]tensorInfo
}

// openShard maps path and validates its header completely: the length prefix, JSON without
// duplicate names, known dtypes, shapes whose byte size matches the offsets, offsets inside the
// data section, and no two tensors overlapping.
func openShard(path string) (*shard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: %d bytes: truncated (no header length)", path, size)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	s := &shard{path: path, mem: mem}
	if err := s.parse(); err != nil {
		s.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *shard) close() {
	if s.mem != nil {
		_ = syscall.Munmap(s.mem)
		s.mem, s.data = nil, nil
	}
}

func (s *shard) parse() error {
	n := binary.LittleEndian.Uint64(s.mem)
	if n > maxHeader || n > uint64(len(s.mem)-8) {
		return fmt.Errorf("header length %d: file has %d bytes after the length (truncated or not safetensors)", n, len(s.mem)-8)
	}
	hdr := s.mem[8 : 8+n]
	s.data = s.mem[8+n:]
	infos, err := parseHeader(hdr)
	if err != nil {
		return err
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].begin < infos[j].begin })
	s.tensors = make(map[string]tensorInfo, len(infos))
	for i, t := range infos {
		if t.end > len(s.data) {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] end past the %d data bytes (truncated file)", t.name, t.begin, t.end, len(s.data))
		}
		if i > 0 && t.begin < infos[i-1].end {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q [%d, %d]", t.name, t.begin, t.end, infos[i-1].name, infos[i-1].begin, infos[i-1].end)
		}
		s.tensors[t.name] = t
	}
	return nil
}

// parseHeader decodes the JSON header token by token, so that a name given twice is an error
// rather than silently the last one.
func parseHeader(hdr []byte) ([]tensorInfo, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("header: not a JSON object")
	}
	seen := map[string]bool{}
	var out []tensorInfo
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		name := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("header: tensor %q given twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var meta map[string]string
			if err := dec.Decode(&meta); err != nil {
				return nil, fmt.Errorf("header: __metadata__: %w", err)
			}
			continue
		}
		var e struct {
			DType   string    `json:"dtype"`
			Shape   []int64   `json:"shape"`
			Offsets []float64 `json:"data_offsets"`
		}
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("header: tensor %q: %w", name, err)
		}
		t, err := checkEntry(name, e.DType, e.Shape, e.Offsets)
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		out = append(out, t)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("header: data after the JSON object")
	}
	return out, nil
}

func checkEntry(name, dtype string, shape []int64, offs []float64) (tensorInfo, error) {
	var size int64
	switch dtype {
	case F32:
		size = 4
	case F16, BF16:
		size = 2
	default:
		// Other dtypes are valid safetensors but no Llama weight uses them; they are reported
		// when such a tensor is one the model needs (see tensor), so accept their entry here.
		size = 0
	}
	if len(offs) != 2 {
		return tensorInfo{}, fmt.Errorf("tensor %q: data_offsets has %d values, want 2", name, len(offs))
	}
	for _, o := range offs {
		if o < 0 || o > math.MaxInt32*float64(1<<20) || o != math.Trunc(o) {
			return tensorInfo{}, fmt.Errorf("tensor %q: data_offsets %v: want non-negative integers", name, offs)
		}
	}
	t := tensorInfo{name: name, dtype: dtype, begin: int(offs[0]), end: int(offs[1])}
	if t.end < t.begin {
		return t, fmt.Errorf("tensor %q: data_offsets [%d, %d] end before they begin", name, t.begin, t.end)
	}
	elems := int64(1)
	for _, d := range shape {
		if d < 0 || d > 1<<40 || (d > 0 && elems > (1<<50)/d) {
			return t, fmt.Errorf("tensor %q: shape %v out of range", name, shape)
		}
		elems *= d
		t.shape = append(t.shape, int(d))
	}
	if size > 0 && elems*size != int64(t.end-t.begin) {
		return t, fmt.Errorf("tensor %q: shape %v of %s is %d bytes but data_offsets [%d, %d] hold %d", name, shape, dtype, elems*size, t.begin, t.end, t.end-t.begin)
	}
	return t, nil
}

// convert decodes the tensor's bytes into dst (float32), which must have its element count.
func (s *shard) convert(t tensorInfo, dst []float32) error {
	raw := s.data[t.begin:t.end]
	switch t.dtype {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = store.FromFloat16(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		return fmt.Errorf("tensor %q: dtype %s: want F32, F16 or BF16", t.name, t.dtype)
	}
	for i, v := range dst {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor %q: element %d is %v", t.name, i, v)
		}
	}
	return nil
}

// floatToBF16 rounds a float32 to bfloat16, to nearest with ties to even (NaN stays NaN).
func floatToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// writeSafetensors streams tensors to w as one safetensors file in dtype (F32, F16 or BF16), header
// padded with spaces to a multiple of 8 bytes as the reference writer does.
// tensor(i) gives the elements of tensor i when it is written (tensors are asked for in order, once).
func writeSafetensors(w io.Writer, names []string, shapes [][]int, tensor func(i int) []float32, dtype string) error {
	size := 4
	if dtype == BF16 || dtype == F16 {
		size = 2
	} else if dtype != F32 {
		return fmt.Errorf("write: dtype %s: want F32, F16 or BF16", dtype)
	}
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := 0
	sizes := make([]int, len(names))
	for i, name := range names {
		n := size
		for _, d := range shapes[i] {
			n *= d
		}
		sizes[i] = n
		hdr[name] = map[string]any{"dtype": dtype, "shape": shapes[i], "data_offsets": [2]int{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	var lenb [8]byte
	binary.LittleEndian.PutUint64(lenb[:], uint64(len(js)))
	if _, err := w.Write(lenb[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<16)
	for i := range names {
		x := tensor(i)
		if len(x)*size != sizes[i] {
			return fmt.Errorf("write: tensor %q has %d elements, shape %v", names[i], len(x), shapes[i])
		}
		for _, v := range x {
			switch dtype {
			case BF16:
				buf = binary.LittleEndian.AppendUint16(buf, floatToBF16(v))
			case F16:
				buf = binary.LittleEndian.AppendUint16(buf, store.ToFloat16(v))
			default:
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
			if len(buf) >= 1<<16-4 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// Tensor is one tensor read by ReadTensors: its shape and its elements as float32.
type Tensor struct {
	Shape []int
	Data  []float32
}

// ReadTensors reads every tensor of one safetensors file (F32, F16 or BF16) into memory, with the
// same header validation as Load. It is meant for small files such as reference outputs.
func ReadTensors(path string) (map[string]Tensor, error) {
	s, err := openShard(path)
	if err != nil {
		return nil, err
	}
	defer s.close()
	out := make(map[string]Tensor, len(s.tensors))
	for name, t := range s.tensors {
		n := 1
		for _, d := range t.shape {
			n *= d
		}
		x := make([]float32, n)
		if err := s.convert(t, x); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[name] = Tensor{Shape: t.shape, Data: x}
	}
	return out, nil
}
