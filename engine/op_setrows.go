package engine

// KernelPrependRow names PrependCLS's fused kernel, a PrependRowKernel.
const KernelPrependRow = "prepend_row"

// PrependRowKernel: x: (B, N, h), row: (h) -> y: (B, N+1, h) with row
// first. Its backward is two strided copies (Copy2D).
type PrependRowKernel func(y, x, row *Tensor)

// PrependCLS puts the vector cls in front of every set and extends the key
// mask with a real (1) column: x: (B, N, h), cls: (h), mask: (B, N) or nil
// -> (B, N+1, h) and mask (B, N+1) (all ones when mask is nil).
// Saves nothing.
func (tp *Tape) PrependCLS(x, cls, mask *Tensor) (*Tensor, *Tensor) {
	if !tp.usable("PrependCLS", x, cls, mask) {
		return tp.placeholder(), tp.placeholder()
	}
	if x.ndim != 3 || cls.size != x.shape[2] {
		return tp.failf("PrependCLS", "x %v and cls %v: want x (B, N, h), cls (h)", x, cls), tp.placeholder()
	}
	B, N, h := x.shape[0], x.shape[1], x.shape[2]
	if mask != nil && (mask.ndim != 2 || mask.shape[0] != B || mask.shape[1] != N) {
		return tp.failf("PrependCLS", "mask %v: want (%d, %d)", mask, B, N), tp.placeholder()
	}
	prependRow, ok := kernel[PrependRowKernel](tp, KernelPrependRow)
	if !ok {
		return tp.placeholder(), tp.placeholder()
	}
	y, ok := tp.alloc("prepend_cls", B, N+1, h)
	if !ok {
		return y, tp.placeholder()
	}
	prependRow(y, x, cls)
	m2, ok := tp.alloc("prepend_cls.mask", B, N+1)
	if !ok {
		return y, m2
	}
	if mask == nil {
		tp.be.Fill(m2, 1)
	} else {
		one, ok := tp.alloc("one", 1)
		if !ok {
			return y, m2
		}
		tp.be.Fill(one, 1)
		prependRow(m2, mask, one)
	}
	return tp.record(node{op: prependRowOp{}, out: y, in: [4]*Tensor{x, cls}}), m2
}

// prependRowOp is PrependCLS's node: in = x, cls.
type prependRowOp struct{}

func (prependRowOp) backward(tp *Tape, n *node) {
	x, cls, dy := n.in[0], n.in[1], n.out.grad
	B, N1, h := n.out.shape[0], n.out.shape[1], n.out.shape[2]
	if dx := tp.accumGrad(x); dx != nil { // rows 1..N of every set
		tp.be.Copy2D(dx, 0, (N1-1)*h, dy, h, N1*h, B, (N1-1)*h, true)
	}
	if dc := tp.accumGrad(cls); dc != nil { // row 0 of every set, summed over sets
		tp.be.Copy2D(dc, 0, 0, dy, 0, N1*h, B, h, true)
	}
}

// Broadcast repeats v over a new leading batch dimension (the decoder's slot
// queries): v: (S, h) -> (B, S, h). Saves nothing.
func (tp *Tape) Broadcast(v *Tensor, B int) *Tensor {
	if !tp.usable("Broadcast", v) {
		return tp.placeholder()
	}
	if v.ndim > 3 || B < 1 {
		return tp.failf("Broadcast", "%v over batch %d", v, B)
	}
	dims := append([]int{B}, v.Shape()...)
	y, ok := tp.alloc("broadcast", dims...)
	if !ok {
		return y
	}
	tp.be.Copy2D(y, 0, v.size, v, 0, 0, B, v.size, false)
	return tp.record(node{op: broadcastOp{}, out: y, in: [4]*Tensor{v}})
}

// broadcastOp is Broadcast's node: in = v.
type broadcastOp struct{}

func (broadcastOp) backward(tp *Tape, n *node) {
	v := n.in[0]
	if dv := tp.accumGrad(v); dv != nil {
		tp.be.Copy2D(dv, 0, 0, n.out.grad, 0, v.size, n.out.shape[0], v.size, true)
	}
}

// TakeRow selects row i of every set: x: (B, N, h) -> (B, h) (the CLS state
// with i = 0). Saves nothing.
func (tp *Tape) TakeRow(x *Tensor, i int) *Tensor {
	if !tp.usable("TakeRow", x) {
		return tp.placeholder()
	}
	if x.ndim != 3 || i < 0 || i >= x.shape[1] {
		return tp.failf("TakeRow", "row %d of %v", i, x)
	}
	B, N, h := x.shape[0], x.shape[1], x.shape[2]
	y, ok := tp.alloc("take_row", B, h)
	if !ok {
		return y
	}
	tp.be.Copy2D(y, 0, h, x, i*h, N*h, B, h, false)
	return tp.record(node{op: takeRowOp{}, out: y, in: [4]*Tensor{x}, row: i})
}

// takeRowOp is TakeRow's node: in = x; row is the row taken.
type takeRowOp struct{}

func (takeRowOp) backward(tp *Tape, n *node) {
	x := n.in[0]
	if dx := tp.accumGrad(x); dx != nil {
		B, N, h := x.shape[0], x.shape[1], x.shape[2]
		tp.be.Copy2D(dx, n.row*h, N*h, n.out.grad, 0, h, B, h, true)
	}
}
