package engine

import (
	"errors"
	"fmt"
)

// NewBuffer allocates a persistent tensor of the given shape on be,
// zero-filled, outside any tape: a decoder's KV cache, which lives across
// steps. Tape.Reset does not touch it and it never gets a gradient; a tape
// on be (or on a Wrapper of be) accepts it as an input like any other
// tensor. Its memory is held until be is closed (engine has no Free), so
// a caller allocates its buffers once, at their largest size, and reuses
// them (a cache that is emptied is only a row count set back to 0).
//
// Rows are written with CopyRows (checked), or Backend.Copy2D for a block
// other than whole rows: appending a step's keys k (N, kvw) to a cache
// buffer kc (capacity, kvw) that holds P rows is CopyRows(kc, P, k, 0, N);
// host data goes in with CopyFrom.
func NewBuffer(be Backend, name string, shape ...int) (*Tensor, error) {
	if be == nil {
		return nil, errors.New("engine: NewBuffer: no backend")
	}
	if name == "" {
		name = "buffer"
	}
	if len(shape) == 0 {
		return nil, fmt.Errorf("engine: buffer %q: no shape", name)
	}
	sh, size, err := makeShape(shape)
	if err != nil {
		return nil, fmt.Errorf("engine: buffer %q: %w", name, err)
	}
	for _, d := range shape {
		if d < 1 {
			return nil, fmt.Errorf("engine: buffer %q: shape %v has an empty dimension", name, shape)
		}
	}
	st, err := be.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("engine: buffer %q %v (%d elements): %w", name, shape, size, err)
	}
	return &Tensor{shape: sh, ndim: len(shape), size: size, st: st, name: name, node: -1}, nil
}

// CopyRows copies rows srcRow..srcRow+rows-1 of src into rows
// dstRow..dstRow+rows-1 of dst, on dst's backend: both are viewed as
// (Rows(), Cols()) matrices of the same width and must live on one backend
// (a tape's tensor into a buffer: appending to a KV cache; a buffer into
// another: branching a cache's prefix). The copy is queued like any
// backend call (asynchronous on a GPU). Overlapping source and destination
// memory is refused.
func CopyRows(dst *Tensor, dstRow int, src *Tensor, srcRow, rows int) error {
	if dst == nil || src == nil {
		return errors.New("engine: CopyRows: nil tensor")
	}
	if dst.st == nil || src.st == nil {
		return fmt.Errorf("engine: CopyRows %v into %v: a tensor has no storage", src, dst)
	}
	if be, sbe := dst.st.Backend(), src.st.Backend(); be != sbe {
		return fmt.Errorf("engine: CopyRows: %v is on backend %q, %v on %q", src, sbe.Name(), dst, be.Name())
	}
	if dst.ndim == 0 || src.ndim == 0 || dst.Cols() != src.Cols() {
		return fmt.Errorf("engine: CopyRows %v into %v: want matrices of one width", src, dst)
	}
	if rows < 0 || srcRow < 0 || dstRow < 0 || srcRow+rows > src.Rows() || dstRow+rows > dst.Rows() {
		return fmt.Errorf("engine: CopyRows: rows %d..%d of %v into rows %d..%d of %v: out of range",
			srcRow, srcRow+rows-1, src, dstRow, dstRow+rows-1, dst)
	}
	if rows == 0 {
		return nil
	}
	w := dst.Cols()
	d0, s0 := dst.off+dstRow*w, src.off+srcRow*w
	if dst.st == src.st && d0 < s0+rows*w && s0 < d0+rows*w {
		return fmt.Errorf("engine: CopyRows: rows %d..%d of %v and rows %d..%d of %v share memory",
			srcRow, srcRow+rows-1, src, dstRow, dstRow+rows-1, dst)
	}
	dst.st.Backend().Copy2D(dst, dstRow*w, w, src, srcRow*w, w, rows, w, false)
	return nil
}

// BufferRows is rows r0..r0+rows-1 of buf, a persistent tensor (NewBuffer, ViewHost), viewed as
// (rows, buf.Cols()) over the same memory: a pass of fewer rows than the buffer was sized for
// reads and writes the buffer's first rows through it, on the device, with no copy (a decoder's
// residual stream between blocks). Like buf it needs no gradient and no tape resets it.
func BufferRows(buf *Tensor, r0, rows int) (*Tensor, error) {
	if buf == nil || buf.st == nil {
		return nil, errors.New("engine: BufferRows: not a tensor with storage")
	}
	if buf.needGrad || buf.param {
		return nil, fmt.Errorf("engine: BufferRows: %v is a parameter or needs a gradient, not a buffer", buf)
	}
	if rows < 1 || r0 < 0 || r0+rows > buf.Rows() {
		return nil, fmt.Errorf("engine: BufferRows: rows %d..%d of %v: out of range", r0, r0+rows-1, buf)
	}
	w := buf.Cols()
	sh, size, err := makeShape([]int{rows, w})
	if err != nil {
		return nil, fmt.Errorf("engine: BufferRows of %v: %w", buf, err)
	}
	return &Tensor{shape: sh, ndim: 2, size: size, st: buf.st, off: buf.off + r0*w, name: buf.name, node: -1}, nil
}
