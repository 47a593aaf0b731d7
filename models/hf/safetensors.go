package hf

import (
	"fmt"
	"io"

	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// Element types of safetensors tensors this package reads and writes.
const (
	F32  = string(safetensors.F32)
	F16  = string(safetensors.F16)
	BF16 = string(safetensors.BF16)
)

// convert decodes t (F32, F16 or BF16) into dst, which must have its element count, refusing NaN
// and infinities: a model weight that is not finite is a damaged or hostile file.
func convert(t safetensors.Tensor, dst []float32) error {
	if err := t.Float32s(dst); err != nil {
		return err
	}
	return finite(t.Name, 0, dst)
}

// convertAt is convert of elements first, first+1, ... of t (one row of a large tensor).
func convertAt(t safetensors.Tensor, first int, dst []float32) error {
	if err := t.Float32sAt(first, dst); err != nil {
		return err
	}
	return finite(t.Name, first, dst)
}

// finite reports the first NaN or infinity of x, elements first... of the tensor name.
func finite(name string, first int, x []float32) error {
	if i := numfmt.FirstNonFinite(x); i >= 0 {
		return fmt.Errorf("tensor %q: element %d is %v", name, first+i, x[i])
	}
	return nil
}

// writeSafetensors streams tensors to w as one safetensors file in dtype (F32, F16 or BF16), in
// the order given, with the metadata format "pt" that PyTorch tools expect. tensor(i) gives the
// elements of tensor i when it is written (tensors are asked for in order, once).
func writeSafetensors(w io.Writer, names []string, shapes [][]int, tensor func(i int) ([]float32, error), dtype string) error {
	dt := safetensors.DType(dtype)
	if dt != safetensors.F32 && dt != safetensors.F16 && dt != safetensors.BF16 {
		return fmt.Errorf("write: dtype %s: want F32, F16 or BF16", dtype)
	}
	specs := make([]safetensors.Spec, len(names))
	for i, name := range names {
		specs[i] = safetensors.Spec{Name: name, DType: dt, Shape: shapes[i]}
	}
	sw, err := safetensors.NewWriter(w, map[string]string{"format": "pt"}, specs)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	for i := range names {
		x, err := tensor(i)
		if err == nil {
			err = sw.WriteTensor(x)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", names[i], err)
		}
	}
	return sw.Close()
}

// Tensor is one tensor read by ReadTensors: its shape and its elements as float32.
type Tensor struct {
	Shape []int
	Data  []float32
}

// ReadTensors reads every tensor of one safetensors file (F32, F16 or BF16) into memory, with the
// same validation as Load. It is meant for small files such as reference outputs.
func ReadTensors(path string) (map[string]Tensor, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]Tensor, len(f.Tensors()))
	for _, t := range f.Tensors() {
		x := make([]float32, t.NumElements())
		if err := convert(t, x); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[t.Name] = Tensor{Shape: t.Shape, Data: x}
	}
	return out, nil
}
