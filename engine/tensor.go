package engine

import (
	"fmt"
	"strings"
)

// maxDims is the largest rank a Tensor may have.
const maxDims = 4

// Storage is a backend's memory: one allocation that tensors view with an
// offset. Each backend implements it once.
type Storage interface {
	// Backend is the backend that owns this memory.
	Backend() Backend
	// Len is the number of float32 elements.
	Len() int
}

// Tensor is a dense row-major float32 array on a device: a shape and a view
// (offset, size) into a Storage. Tensors are created by a Tape (activations
// and inputs, valid until the Tape's next Reset) or by Params (parameters).
type Tensor struct {
	shape [maxDims]int
	ndim  int
	size  int
	st    Storage
	off   int

	name     string  // parameter name, or the op that made it
	needGrad bool    // a gradient flows back into this tensor
	param    bool    // a view into Params; its grad is a view into Params' gradient buffer
	grad     *Tensor // gradient, same shape; nil until needed
	// gradReady says grad holds values (else it is a recycled buffer that
	// the first backward kernel to reach it overwrites or zeroes).
	gradReady bool
	// alias says the tensor is a view of another tensor's gradient (a
	// LinearStack part's): its storage is not the gradient pool's to recycle.
	alias bool
	node  int // index of the producing tape node, -1 for leaves
}

// Shape returns the dimensions; the slice aliases the tensor: do not modify.
func (t *Tensor) Shape() []int { return t.shape[:t.ndim:t.ndim] }

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return t.ndim }

// Dim returns dimension i; negative i counts from the end (-1 is the last).
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += t.ndim
	}
	return t.shape[i]
}

// Size is the number of elements.
func (t *Tensor) Size() int { return t.size }

// Name is the parameter name, or for activations the op that made it.
func (t *Tensor) Name() string { return t.name }

// Storage is the memory the tensor views (for backends).
func (t *Tensor) Storage() Storage { return t.st }

// Offset is the tensor's first element within Storage (for backends).
func (t *Tensor) Offset() int { return t.off }

// RequiresGrad reports whether a gradient flows back into this tensor.
func (t *Tensor) RequiresGrad() bool { return t.needGrad }

// Grad is the gradient with the tensor's shape: for parameters a view into
// the Params gradient buffer, for activations valid only during Backward;
// nil when the tensor needs no gradient.
func (t *Tensor) Grad() *Tensor { return t.grad }

// String describes the tensor, e.g. "layers.0.attn.q_proj.weight (384, 384)".
func (t *Tensor) String() string {
	dims := make([]string, t.ndim)
	for i := range t.ndim {
		dims[i] = fmt.Sprint(t.shape[i])
	}
	return fmt.Sprintf("%s (%s)", t.name, strings.Join(dims, ", "))
}

// CopyFrom copies host data into the tensor; len(src) must equal Size().
func (t *Tensor) CopyFrom(src []float32) error {
	if len(src) != t.size {
		return fmt.Errorf("engine: copy %d values into %v: want %d", len(src), t, t.size)
	}
	if t.st == nil {
		return fmt.Errorf("engine: copy into %v: it has no storage (a parameter before Params.Alloc?)", t)
	}
	t.st.Backend().Upload(t, src)
	return nil
}

// CopyTo copies the tensor to host memory; len(dst) must equal Size().
func (t *Tensor) CopyTo(dst []float32) error {
	if len(dst) != t.size {
		return fmt.Errorf("engine: copy %v into %d values: want %d", t, len(dst), t.size)
	}
	if t.st == nil {
		return fmt.Errorf("engine: copy %v: it has no storage (a parameter before Params.Alloc?)", t)
	}
	t.st.Backend().Download(dst, t)
	return nil
}

// ToHost returns a new host copy of the tensor (for tests and logging; it
// allocates).
func (t *Tensor) ToHost() []float32 {
	out := make([]float32, t.size)
	t.st.Backend().Download(out, t)
	return out
}

// Item returns element 0, the value of a scalar such as a loss.
func (t *Tensor) Item() float32 {
	var v [1]float32
	t.st.Backend().DownloadRange(v[:], t, 0)
	return v[0]
}

// makeShape validates dims and returns them as an array with their product.
func makeShape(dims []int) (shape [maxDims]int, size int, err error) {
	if len(dims) > maxDims {
		return shape, 0, fmt.Errorf("engine: shape %v has rank %d > %d", dims, len(dims), maxDims)
	}
	size = 1
	for i, d := range dims {
		if d < 0 {
			return shape, 0, fmt.Errorf("engine: shape %v has negative dimension %d", dims, d)
		}
		shape[i] = d
		size *= d
	}
	return shape, size, nil
}

// SameShape reports whether a and b have identical shapes.
func SameShape(a, b *Tensor) bool {
	return a.ndim == b.ndim && a.shape == b.shape
}

// Rows is the product of all dimensions but the last: the M of a row-wise
// op (1 for a scalar).
func (t *Tensor) Rows() int {
	if t.ndim == 0 {
		return 1
	}
	if t.shape[t.ndim-1] == 0 {
		return 0
	}
	return t.size / t.shape[t.ndim-1]
}

// Cols is the last dimension: the width of a row-wise op (1 for a scalar).
func (t *Tensor) Cols() int {
	if t.ndim == 0 {
		return 1
	}
	return t.shape[t.ndim-1]
}
