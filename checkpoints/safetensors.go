package checkpoints

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/nlpodyssey/safetensors"
)

// MetaConfig is the metadata key under which the full model config is stored as JSON.
const MetaConfig = "config"

// MetaFormat is the metadata key that PyTorch tools (transformers' from_pretrained) read; its value
// is "pt" for files in PyTorch layout.
const MetaFormat = "format"

// metadataKey is the reserved header entry that holds the string map rather than a tensor.
const metadataKey = "__metadata__"

// Tensor is one named float32 tensor in row-major order; Data has the product of Shape elements
// (one for an empty Shape, a scalar).
type Tensor struct {
	// Name is the tensor's key in the file, e.g. "layers.0.attn.q_proj.weight".
	Name string
	// Shape is the tensor's dimensions, outermost first ([out, in] for a linear weight).
	Shape []int
	// Data holds the elements in row-major order.
	Data []float32
}

// Spec is the name and shape a caller expects a tensor to have.
type Spec struct {
	// Name is the tensor's key in the file.
	Name string
	// Shape is the expected dimensions.
	Shape []int
}

// Save writes tensors and metadata to path as a safetensors file (see the package doc for the
// layout), atomically as WriteFileAtomic does. Tensor names must be unique, non-empty, valid UTF-8
// and not "__metadata__"; each tensor's data length must match its shape.
func Save(path string, tensors []Tensor, metadata map[string]string) error {
	return fsHooks{}.save(path, tensors, metadata)
}

func (h fsHooks) save(path string, tensors []Tensor, metadata map[string]string) error {
	views, err := viewsOf(tensors)
	if err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	if err := checkMetadata(metadata); err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	return h.writeAtomic(path, func(w io.Writer) error {
		return safetensors.SerializeToWriter(views, metadata, w)
	})
}

// f32View adapts a Tensor to the writer's View interface, encoding it only when written.
type f32View struct {
	shape []uint64
	data  []float32
}

func (v f32View) DType() safetensors.DType { return safetensors.F32 }
func (v f32View) Shape() []uint64          { return v.shape }
func (v f32View) DataLen() uint64          { return 4 * uint64(len(v.data)) }

func (v f32View) Data() []byte {
	b := make([]byte, 4*len(v.data))
	for i, x := range v.data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// viewsOf validates tensors and wraps them for the writer.
func viewsOf(tensors []Tensor) (map[string]f32View, error) {
	views := make(map[string]f32View, len(tensors))
	for _, t := range tensors {
		if err := checkName(t.Name); err != nil {
			return nil, err
		}
		if _, dup := views[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		n, err := numElements(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if n != len(t.Data) {
			return nil, fmt.Errorf("tensor %q: shape %v has %d elements but data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		// A non-nil shape, because the writer encodes a nil slice as JSON null, which no reader accepts.
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = uint64(d)
		}
		views[t.Name] = f32View{shape: shape, data: t.Data}
	}
	return views, nil
}

func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("tensor with an empty name")
	case name == metadataKey:
		return fmt.Errorf("tensor name %q is reserved for the metadata map", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("tensor name %q is not valid UTF-8", name)
	}
	return nil
}

// checkMetadata rejects strings that JSON encoding would silently alter (invalid UTF-8 becomes
// U+FFFD), so that what is saved is what is loaded.
func checkMetadata(metadata map[string]string) error {
	for k, v := range metadata {
		if !utf8.ValidString(k) {
			return fmt.Errorf("metadata key %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("metadata %q: value is not valid UTF-8", k)
		}
	}
	return nil
}

// numElements is the product of shape, with negative dimensions and int overflow reported. A zero
// dimension makes the product zero whatever the others are, but the others must still multiply
// without overflow so that no later computation on the shape can wrap.
func numElements(shape []int) (int, error) {
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

// Load reads a safetensors file whose tensors are all F32, returning them in file order (sorted by
// name for files this package wrote) and the metadata map (empty, not nil, when the file has none).
func Load(path string) (tensors []Tensor, metadata map[string]string, err error) {
	return load(path, false)
}

// LoadAny is Load that also accepts F16 and BF16 tensors, converting them to float32 exactly.
func LoadAny(path string) ([]Tensor, map[string]string, error) {
	return load(path, true)
}

func load(path string, anyFloat bool) ([]Tensor, map[string]string, error) {
	buf, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	raws, meta, err := parse(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	tensors, err := decodeAll(raws, anyFloat)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	return tensors, meta, nil
}

func decodeAll(raws []rawTensor, anyFloat bool) ([]Tensor, error) {
	tensors := make([]Tensor, len(raws))
	for i, r := range raws {
		if err := r.checkDType(anyFloat); err != nil {
			return nil, err
		}
		data := make([]float32, r.numel())
		r.decode(data)
		tensors[i] = Tensor{Name: r.name, Shape: r.shape, Data: data}
	}
	return tensors, nil
}

// LoadInto reads an F32 safetensors file and copies each tensor named in want into dst[name], which
// must already have the right length. The file must hold exactly the tensors of want, each with the
// wanted shape; otherwise nothing is copied and the error lists every missing name, unexpected name
// and shape mismatch (wanted vs found).
func LoadInto(path string, want []Spec, dst map[string][]float32) (metadata map[string]string, err error) {
	buf, err := readFile(path)
	if err != nil {
		return nil, err
	}
	raws, meta, err := parse(buf)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	for _, r := range raws {
		if err := r.checkDType(false); err != nil {
			return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
		}
	}
	byName := make(map[string]int, len(raws))
	have := make([]Spec, len(raws))
	for i, r := range raws {
		byName[r.name] = i
		have[i] = Spec{Name: r.name, Shape: r.shape}
	}
	if err := matchSpecs(have, want, lenIn(dst)); err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	for _, w := range want {
		raws[byName[w.Name]].decode(dst[w.Name])
	}
	return meta, nil
}

// CopyInto is LoadInto for tensors already in memory (for example the weights of a Checkpoint, or
// the result of LoadAny): it checks tensors against want and copies them into dst, all or nothing.
func CopyInto(tensors []Tensor, want []Spec, dst map[string][]float32) error {
	have, byName, err := specsOf(tensors)
	if err != nil {
		return err
	}
	if err := matchSpecs(have, want, lenIn(dst)); err != nil {
		return fmt.Errorf("checkpoints: %w", err)
	}
	for _, w := range want {
		copy(dst[w.Name], tensors[byName[w.Name]].Data)
	}
	return nil
}

// specsOf is the name and shape of each of tensors, in order, and the index of each name; it
// refuses a tensor whose data does not fill its shape and a name that appears twice.
func specsOf(tensors []Tensor) (have []Spec, byName map[string]int, err error) {
	have = make([]Spec, len(tensors))
	byName = make(map[string]int, len(tensors))
	for i, t := range tensors {
		n, err := numElements(t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoints: tensor %q: %w", t.Name, err)
		}
		if n != len(t.Data) {
			return nil, nil, fmt.Errorf("checkpoints: tensor %q: shape %v has %d elements but data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		if _, dup := byName[t.Name]; dup {
			return nil, nil, fmt.Errorf("checkpoints: tensor %q appears twice", t.Name)
		}
		byName[t.Name] = i
		have[i] = Spec{Name: t.Name, Shape: t.Shape}
	}
	return have, byName, nil
}

// lenIn is the destination lookup of matchSpecs for destination slices keyed by name.
func lenIn(dst map[string][]float32) func(name string) (int, bool) {
	return func(name string) (int, bool) {
		d, ok := dst[name]
		return len(d), ok
	}
}

// matchSpecs reports every difference between the tensors a file has (unique names) and those the
// caller wants, and every destination that is missing or of the wrong length; dstLen gives the
// number of elements of the destination of a name, and false when there is none.
func matchSpecs(have, want []Spec, dstLen func(name string) (int, bool)) error {
	haveShape := make(map[string][]int, len(have))
	for _, s := range have {
		haveShape[s.Name] = s.Shape
	}
	var problems []string
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		if wanted[w.Name] {
			problems = append(problems, fmt.Sprintf("tensor %q is wanted twice", w.Name))
			continue
		}
		wanted[w.Name] = true
		n, err := numElements(w.Shape)
		if err != nil {
			problems = append(problems, fmt.Sprintf("wanted tensor %q: %v", w.Name, err))
			continue
		}
		got, ok := haveShape[w.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing tensor %q (want shape %v)", w.Name, w.Shape))
		case !slices.Equal(got, w.Shape):
			problems = append(problems, fmt.Sprintf("tensor %q has shape %v, want %v", w.Name, got, w.Shape))
		}
		d, ok := dstLen(w.Name)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("no destination for tensor %q", w.Name))
		case d != n:
			problems = append(problems, fmt.Sprintf("destination for tensor %q has %d elements, shape %v needs %d", w.Name, d, w.Shape, n))
		}
	}
	for _, s := range have {
		if !wanted[s.Name] {
			problems = append(problems, fmt.Sprintf("unexpected tensor %q (shape %v)", s.Name, s.Shape))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%d tensor mismatches: %s", len(problems), strings.Join(problems, "; "))
}

// readFile reads a whole regular file after checking that its header length fits inside it, so a
// hostile header length never sizes an allocation; the only allocation is the file's real size.
func readFile(path string) ([]byte, error) { return readFileOpts(path, false) }

// readFileOpts is readFile refusing a symbolic link when noFollow is set.
func readFileOpts(path string, noFollow bool) ([]byte, error) {
	// Non-blocking open, then the regular-file check: a FIFO would block a plain open forever.
	open := safefile.Open
	if noFollow {
		open = safefile.OpenNoFollow
	}
	f, fi, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	defer f.Close()
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("checkpoints: load %s: file is %d bytes, shorter than the 8-byte header length", path, size)
	}
	if uint64(size) > uint64(math.MaxInt) {
		return nil, fmt.Errorf("checkpoints: load %s: file of %d bytes does not fit in memory", path, size)
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: read header length: %w", path, err)
	}
	if n := binary.LittleEndian.Uint64(lenBuf[:]); n > uint64(size-8) {
		return nil, fmt.Errorf("checkpoints: load %s: header length %d exceeds the %d bytes that follow it", path, n, size-8)
	}
	buf := make([]byte, size)
	copy(buf, lenBuf[:])
	if _, err := io.ReadFull(f, buf[8:]); err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: read %d bytes: %w", path, size, err)
	}
	return buf, nil
}

// rawTensor is a validated tensor still in its file encoding.
type rawTensor struct {
	name  string
	dtype safetensors.DType
	shape []int
	off   uint64 // data_offsets[0], for ordering
	data  []byte // exactly numel * dtype size bytes
}

func (r rawTensor) numel() int { return len(r.data) / int(r.dtype.Size()) }

func (r rawTensor) checkDType(anyFloat bool) error {
	switch r.dtype {
	case safetensors.F32:
		return nil
	case safetensors.F16, safetensors.BF16:
		if anyFloat {
			return nil
		}
		return fmt.Errorf("tensor %q has dtype %v, want F32 (LoadAny converts F16 and BF16)", r.name, r.dtype)
	}
	if anyFloat {
		return fmt.Errorf("tensor %q has dtype %v, want F32, F16 or BF16", r.name, r.dtype)
	}
	return fmt.Errorf("tensor %q has dtype %v, want F32", r.name, r.dtype)
}

// decode converts the tensor to float32 bit by bit, so NaN payloads survive (a float conversion
// through the FPU could quiet a signalling NaN). dst has numel elements and dtype is checked.
func (r rawTensor) decode(dst []float32) {
	switch r.dtype {
	case safetensors.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.data[4*i:]))
		}
	case safetensors.F16:
		for i := range dst {
			dst[i] = math.Float32frombits(f16ToF32Bits(binary.LittleEndian.Uint16(r.data[2*i:])))
		}
	case safetensors.BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(bf16ToF32Bits(binary.LittleEndian.Uint16(r.data[2*i:])))
		}
	}
}

// parse validates a whole safetensors file in memory and returns its tensors in file order. The
// library decodes the JSON and dtypes; parse then checks the layout itself so that each fault is
// reported with the tensor, offsets and sizes involved: data_offsets must tile the data section in
// order with no gap, overlap or overrun, and each byte range must match its shape. It also rejects
// what the library lets through: invalid UTF-8 (encoding/json would silently replace it), a header
// that is not a JSON object, empty names and dimensions that do not fit an int. Finally the
// library's own validation runs too, so nothing it would refuse is accepted.
func parse(buf []byte) ([]rawTensor, map[string]string, error) {
	if len(buf) < 8 {
		return nil, nil, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n > uint64(len(buf)-8) {
		return nil, nil, fmt.Errorf("header length %d exceeds the %d bytes that follow it", n, len(buf)-8)
	}
	header := buf[8 : 8+n]
	if i := invalidUTF8At(header); i >= 0 {
		return nil, nil, fmt.Errorf("header is not valid UTF-8 (byte %d of the header)", i)
	}
	if len(header) == 0 || header[0] != '{' {
		return nil, nil, errors.New("header does not start with '{'")
	}
	var md safetensors.Metadata
	if err := json.Unmarshal(header, &md); err != nil {
		return nil, nil, fmt.Errorf("invalid header: %w", err)
	}
	data := buf[8+n:]
	infos := md.Tensors()
	raws := make([]rawTensor, 0, len(infos))
	for name, info := range infos {
		if name == "" {
			return nil, nil, errors.New("tensor with an empty name")
		}
		shape := make([]int, len(info.Shape))
		for i, d := range info.Shape {
			if d > math.MaxInt {
				return nil, nil, fmt.Errorf("tensor %q: dimension %d of shape %v is too large", name, i, info.Shape)
			}
			shape[i] = int(d)
		}
		numel, err := numElements(shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		s, e := info.DataOffsets[0], info.DataOffsets[1]
		if e < s {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] end before they start", name, s, e)
		}
		size := info.DType.Size()
		if uint64(numel) > math.MaxUint64/size || uint64(numel)*size != e-s {
			return nil, nil, fmt.Errorf("tensor %q: %v shape %v needs %d elements of %d bytes, but data_offsets [%d, %d] span %d bytes",
				name, info.DType, shape, numel, size, s, e, e-s)
		}
		if e > uint64(len(data)) {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the %d bytes of data", name, s, e, len(data))
		}
		raws = append(raws, rawTensor{name: name, dtype: info.DType, shape: shape, off: s, data: data[s:e]})
	}
	slices.SortFunc(raws, func(a, b rawTensor) int {
		return cmp.Or(
			cmp.Compare(a.off, b.off),
			cmp.Compare(len(a.data), len(b.data)),
			strings.Compare(a.name, b.name))
	})
	pos, prev := uint64(0), ""
	for _, r := range raws {
		switch {
		case r.off < pos:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d",
				r.name, r.off, r.off+uint64(len(r.data)), prev, pos)
		case r.off > pos:
			return nil, nil, fmt.Errorf("data bytes [%d, %d) before tensor %q belong to no tensor", pos, r.off, r.name)
		}
		pos, prev = r.off+uint64(len(r.data)), r.name
	}
	if pos != uint64(len(data)) {
		return nil, nil, fmt.Errorf("data section has %d bytes but its tensors cover only %d", len(data), pos)
	}
	if _, _, err := safetensors.ReadMetadata(buf); err != nil {
		return nil, nil, fmt.Errorf("invalid header: %w", err)
	}
	meta := make(map[string]string, len(md.Metadata()))
	for k, v := range md.Metadata() {
		meta[k] = v
	}
	return raws, meta, nil
}

// invalidUTF8At is the index of the first byte of b that is not valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
