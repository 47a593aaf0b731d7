package engine

// Reshape views x with new dimensions of the same total size (no copy).
// Saves nothing.
func (tp *Tape) Reshape(x *Tensor, dims ...int) *Tensor {
	if !tp.usable("Reshape", x) {
		return tp.placeholder()
	}
	sh, size, err := makeShape(dims)
	if err != nil || size != x.size {
		return tp.failf("Reshape", "%v to %v", x, dims)
	}
	y := tp.newTensor()
	y.shape, y.ndim, y.size, y.st, y.off, y.name = sh, len(dims), size, x.st, x.off, "reshape"
	return tp.record(node{op: reshapeOp{}, out: y, in: [4]*Tensor{x}})
}

// reshapeOp is Reshape's node: in = x, whose storage out views.
type reshapeOp struct{}

func (reshapeOp) backward(tp *Tape, n *node) {
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		tp.be.Axpy(dx, 1, n.out.grad)
	}
}
