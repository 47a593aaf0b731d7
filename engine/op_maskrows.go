package engine

// KernelScaleRows names MaskRows' fused kernel, a ScaleRowsKernel.
const KernelScaleRows = "scale_rows"

// ScaleRowsKernel: y[r, :] (+)= x[r, :] * s[r], x: (..., h) with
// rows() == s.Size(). MaskRows' forward and backward both run it.
type ScaleRowsKernel func(y, x, s *Tensor, accumulate bool)

// MaskRows zeroes the padded rows of every set: x: (B, N, h), mask: (B, N)
// -> (B, N, h); padded rows get zero gradient. Saves the mask.
func (tp *Tape) MaskRows(x, mask *Tensor) *Tensor {
	if !tp.usable("MaskRows", x, mask) {
		return tp.placeholder()
	}
	if x.ndim != 3 || mask.ndim != 2 || mask.shape[0] != x.shape[0] || mask.shape[1] != x.shape[1] {
		return tp.failf("MaskRows", "x %v, mask %v: want (B, N, h) and (B, N)", x, mask)
	}
	scaleRows, ok := kernel[ScaleRowsKernel](tp, KernelScaleRows)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("mask_rows", x.Shape()...)
	if !ok {
		return y
	}
	scaleRows(y, x, mask, false)
	return tp.record(node{op: maskRowsOp{}, out: y, in: [4]*Tensor{x, mask}})
}

// maskRowsOp is MaskRows' node: in = x, mask.
type maskRowsOp struct{}

func (maskRowsOp) backward(tp *Tape, n *node) {
	scaleRows, ok := kernel[ScaleRowsKernel](tp, KernelScaleRows)
	if !ok {
		return
	}
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		scaleRows(dx, n.out.grad, n.in[1], true)
	}
}
