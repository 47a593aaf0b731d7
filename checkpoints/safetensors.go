package checkpoints

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/internal/safetensors"
)

// MetaConfig is the metadata key under which the full model config is stored as JSON.
const MetaConfig = "config"

// MetaFormat is the metadata key that PyTorch tools (transformers' from_pretrained) read; its value
// is "pt" for files in PyTorch layout.
const MetaFormat = "format"

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
	sorted, err := inFileOrder(tensors)
	if err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	return h.writeAtomic(path, func(w io.Writer) error { return writeTensors(w, sorted, metadata) })
}

// inFileOrder checks that each tensor's data fills its shape and returns the tensors in the order a
// file holds them: by name (the order the first writer, github.com/nlpodyssey/safetensors,
// chose for tensors of one dtype, kept so that files stay byte for byte the same).
func inFileOrder(tensors []Tensor) ([]Tensor, error) {
	for _, t := range tensors {
		n, err := safetensors.NumElements(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if n != len(t.Data) {
			return nil, fmt.Errorf("tensor %q: shape %v has %d elements but data has %d", t.Name, t.Shape, n, len(t.Data))
		}
	}
	sorted := slices.Clone(tensors)
	slices.SortStableFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return sorted, nil
}

// writeTensors writes sorted (see inFileOrder) as F32 with metadata to w. The writer refuses names
// and metadata that the header cannot carry faithfully, before writing anything.
func writeTensors(w io.Writer, sorted []Tensor, metadata map[string]string) error {
	sw, err := safetensors.NewWriter(w, metadata, f32Specs(sorted))
	if err != nil {
		return err
	}
	for _, t := range sorted {
		if err := sw.WriteTensor(t.Data); err != nil {
			return err
		}
	}
	return sw.Close()
}

// f32Specs is the writer's description of tensors, each stored as F32.
func f32Specs(tensors []Tensor) []safetensors.Spec {
	specs := make([]safetensors.Spec, len(tensors))
	for i, t := range tensors {
		specs[i] = safetensors.Spec{Name: t.Name, DType: safetensors.F32, Shape: t.Shape}
	}
	return specs
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
	f, err := open(path, false)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tensors, err := decodeAll(f.Tensors(), anyFloat)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	return tensors, maps.Clone(f.Metadata()), nil
}

// open maps and validates a safetensors file (refusing a symbolic link when noFollow is set).
// Its errors name the file: they are the reader's, which name it, under this package's prefix.
func open(path string, noFollow bool) (*safetensors.File, error) {
	opener := safetensors.Open
	if noFollow {
		opener = safetensors.OpenNoFollow
	}
	f, err := opener(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: load: %w", err)
	}
	return f, nil
}

func decodeAll(raws []safetensors.Tensor, anyFloat bool) ([]Tensor, error) {
	tensors := make([]Tensor, len(raws))
	for i, r := range raws {
		if err := checkDType(r, anyFloat); err != nil {
			return nil, err
		}
		data := make([]float32, r.NumElements())
		if err := r.Float32s(data); err != nil {
			return nil, err
		}
		tensors[i] = Tensor{Name: r.Name, Shape: r.Shape, Data: data}
	}
	return tensors, nil
}

// LoadInto reads an F32 safetensors file and copies each tensor named in want into dst[name], which
// must already have the right length. The file must hold exactly the tensors of want, each with the
// wanted shape; otherwise nothing is copied and the error lists every missing name, unexpected name
// and shape mismatch (wanted vs found).
func LoadInto(path string, want []Spec, dst map[string][]float32) (metadata map[string]string, err error) {
	f, err := open(path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raws := f.Tensors()
	for _, r := range raws {
		if err := checkDType(r, false); err != nil {
			return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
		}
	}
	byName := make(map[string]int, len(raws))
	have := make([]Spec, len(raws))
	for i, r := range raws {
		byName[r.Name] = i
		have[i] = Spec{Name: r.Name, Shape: r.Shape}
	}
	if err := matchSpecs(have, want, lenIn(dst)); err != nil {
		return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	for _, w := range want {
		if err := raws[byName[w.Name]].Float32s(dst[w.Name]); err != nil {
			return nil, fmt.Errorf("checkpoints: load %s: %w", path, err)
		}
	}
	return maps.Clone(f.Metadata()), nil
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
		n, err := safetensors.NumElements(t.Shape)
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
		n, err := safetensors.NumElements(w.Shape)
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

// checkDType accepts F32, and F16 and BF16 when anyFloat is set.
func checkDType(r safetensors.Tensor, anyFloat bool) error {
	switch r.DType {
	case safetensors.F32:
		return nil
	case safetensors.F16, safetensors.BF16:
		if anyFloat {
			return nil
		}
		return fmt.Errorf("tensor %q has dtype %v, want F32 (LoadAny converts F16 and BF16)", r.Name, r.DType)
	}
	if anyFloat {
		return fmt.Errorf("tensor %q has dtype %v, want F32, F16 or BF16", r.Name, r.DType)
	}
	return fmt.Errorf("tensor %q has dtype %v, want F32", r.Name, r.DType)
}
