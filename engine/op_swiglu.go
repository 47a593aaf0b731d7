package engine

// KernelSwiGLU names SwiGLU's fused kernels, a SwiGLUKernels.
const KernelSwiGLU = "swiglu"

// SwiGLUKernels are SwiGLU's fused kernels.
type SwiGLUKernels struct {
	// Forward: y = silu(gate) * up.
	Forward func(y, gate, up *Tensor)
	// Backward writes dgate and dup, adding into them when the flag says
	// so (else overwriting).
	Backward func(dgate, dup, dy, gate, up *Tensor, accGate, accUp bool)
}

// SwiGLU is silu(gate) * up elementwise, silu(g) = g * sigmoid(g).
// gate, up: same shape -> same shape. Saves gate and up.
func (tp *Tape) SwiGLU(gate, up *Tensor) *Tensor {
	if !tp.usable("SwiGLU", gate, up) {
		return tp.placeholder()
	}
	if !SameShape(gate, up) {
		return tp.failf("SwiGLU", "gate %v and up %v differ in shape", gate, up)
	}
	k, ok := kernel[SwiGLUKernels](tp, KernelSwiGLU)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("swiglu", gate.Shape()...)
	if !ok {
		return y
	}
	k.Forward(y, gate, up)
	return tp.record(node{op: swigluOp{}, out: y, in: [4]*Tensor{gate, up}})
}

// swigluOp is SwiGLU's node: in = gate, up.
type swigluOp struct{}

func (swigluOp) backward(tp *Tape, n *node) {
	k, ok := kernel[SwiGLUKernels](tp, KernelSwiGLU)
	if !ok {
		return
	}
	gate, up, dy := n.in[0], n.in[1], n.out.grad
	if gate == up {
		// silu(x)*x: both terms land in one buffer. overwriteGrad would mark it ready before
		// the kernel wrote anything, so the first term would add to whatever a recycled buffer
		// held: clear it (when it holds no values yet) and add both terms.
		d := tp.accumGrad(gate)
		k.Backward(d, d, dy, gate, up, true, true)
		return
	}
	dg, accG := tp.overwriteGrad(gate)
	du, accU := tp.overwriteGrad(up)
	k.Backward(dg, du, dy, gate, up, accG, accU)
}
