package engine

// SwiGLU is silu(gate) * up elementwise, silu(g) = g * sigmoid(g).
// gate, up: same shape -> same shape. Saves gate and up.
func (tp *Tape) SwiGLU(gate, up *Tensor) *Tensor {
	if !tp.usable("SwiGLU", gate, up) {
		return tp.placeholder()
	}
	if !SameShape(gate, up) {
		return tp.failf("SwiGLU", "gate %v and up %v differ in shape", gate, up)
	}
	y, ok := tp.alloc("swiglu", gate.Shape()...)
	if !ok {
		return y
	}
	tp.be.SwiGLU(y, gate, up)
	return tp.record(node{op: swigluOp{}, out: y, in: [4]*Tensor{gate, up}})
}

// swigluOp is SwiGLU's node: in = gate, up.
type swigluOp struct{}

func (swigluOp) backward(tp *Tape, n *node) {
	gate, up, dy := n.in[0], n.in[1], n.out.grad
	if gate == up {
		// silu(x)*x: both terms land in one buffer. overwriteGrad would mark it ready before
		// the kernel wrote anything, so the first term would add to whatever a recycled buffer
		// held: clear it (when it holds no values yet) and add both terms.
		d := tp.accumGrad(gate)
		tp.be.SwiGLUBackward(d, d, dy, gate, up, true, true)
		return
	}
	dg, accG := tp.overwriteGrad(gate)
	du, accU := tp.overwriteGrad(up)
	tp.be.SwiGLUBackward(dg, du, dy, gate, up, accG, accU)
}
