package engine

// MaskRows zeroes the padded rows of every set: x: (B, N, h), mask: (B, N)
// -> (B, N, h); padded rows get zero gradient. Saves the mask.
func (tp *Tape) MaskRows(x, mask *Tensor) *Tensor {
	if !tp.usable("MaskRows", x, mask) {
		return tp.placeholder()
	}
	if x.ndim != 3 || mask.ndim != 2 || mask.shape[0] != x.shape[0] || mask.shape[1] != x.shape[1] {
		return tp.failf("MaskRows", "x %v, mask %v: want (B, N, h) and (B, N)", x, mask)
	}
	y, ok := tp.alloc("mask_rows", x.Shape()...)
	if !ok {
		return y
	}
	tp.be.ScaleRows(y, x, mask, false)
	return tp.record(node{op: maskRowsOp{}, out: y, in: [4]*Tensor{x, mask}})
}

// maskRowsOp is MaskRows' node: in = x, mask.
type maskRowsOp struct{}

func (maskRowsOp) backward(tp *Tape, n *node) {
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		tp.be.ScaleRows(dx, n.out.grad, n.in[1], true)
	}
}
