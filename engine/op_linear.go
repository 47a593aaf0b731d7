package engine

// Linear is y = x W^T without bias, PyTorch layout.
// x: (..., in), w: (out, in) -> y: (..., out).
// Saves x and w (references, no copy). The gradient into x is skipped when x
// needs none (the input projection of data).
func (tp *Tape) Linear(x, w *Tensor) *Tensor {
	if !tp.usable("Linear", x, w) {
		return tp.placeholder()
	}
	if w.ndim != 2 || x.ndim < 1 || x.Cols() != w.shape[1] {
		return tp.failf("Linear", "x %v and weight %v: want x (..., %d)", x, w, w.Dim(-1))
	}
	dims := append(x.shape[:x.ndim-1:x.ndim-1], w.shape[0])
	y, ok := tp.alloc("linear", dims...)
	if !ok {
		return y
	}
	m := x.Rows()
	tp.be.Gemm(false, true, 1, m, w.shape[0], w.shape[1], 1, x, w, 0, y)
	return tp.record(node{op: linearOp{}, out: y, in: [4]*Tensor{x, w}})
}

// linearOp is Linear's node: in = x, w.
type linearOp struct{}

func (linearOp) backward(tp *Tape, n *node) {
	be, dy := tp.be, n.out.grad
	x, w := n.in[0], n.in[1]
	m, out, inDim := x.Rows(), w.shape[0], w.shape[1]
	if dx, acc := tp.overwriteGrad(x); dx != nil {
		be.Gemm(false, false, 1, m, inDim, out, 1, dy, w, beta(acc), dx) // dx (m, in) (+)= dy (m, out) W (out, in)
	}
	if dw := tp.accumGrad(w); dw != nil {
		be.Gemm(true, false, 1, out, inDim, m, 1, dy, x, 1, dw) // dW (out, in) += dy^T x
	}
}

// LinearStack applies P Linear layers to one input with one strided GEMM:
// w: (P*out, in) holds the P weights one after another (Params.Stack views
// separately named parameters so, as a fused q/k/v projection), x: (..., in),
// and ys (len P, at most 8) receives the P outputs (..., out). The outputs are
// consecutive blocks of one (P, ..., out) activation, so taking them costs no
// copy, and their gradients are written in place into the stack's.
// The gradients are those of P separate Linear calls (bit for bit on the CPU):
// dx takes the P products in the order the tape would have run them (the
// last part first), and dW is one strided GEMM. Saves x and w.
func (tp *Tape) LinearStack(x, w *Tensor, ys []*Tensor) {
	P := len(ys)
	if !tp.usable("LinearStack", x, w) || P < 1 || P > maxStackParts || w.ndim != 2 || w.shape[0]%P != 0 ||
		x.ndim < 1 || x.ndim >= maxDims || x.Cols() != w.shape[1] {
		t := tp.placeholder()
		if tp.err == nil {
			t = tp.failf("LinearStack", "x %v, weight %v and %d parts: want x (..., in) of rank < %d, weight (P*out, in), 1 <= P <= %d",
				x, w, P, maxDims, maxStackParts)
		}
		for i := range ys {
			ys[i] = t
		}
		return
	}
	out, in := w.shape[0]/P, w.shape[1]
	var dims [maxDims]int
	dims[0] = P
	copy(dims[1:], x.shape[:x.ndim-1])
	dims[x.ndim] = out
	y, ok := tp.alloc("linear_stack", dims[:x.ndim+1]...)
	if !ok {
		for i := range ys {
			ys[i] = y
		}
		return
	}
	m := x.Rows()
	tp.be.GemmStrided(false, true, P, m, out, in, 1, x, 0, w, out*in, 0, y, m*out) // Y_i (m, out) = x W_i^T
	y = tp.record(node{op: linearStackOp{}, out: y, in: [4]*Tensor{x, w}, parts: P})
	for i := range ys {
		v := tp.newTensor()
		v.ndim, v.size, v.name = x.ndim, y.size/P, "linear_stack.part"
		copy(v.shape[:], y.shape[1:y.ndim])
		v.st, v.off = y.st, y.off+i*v.size
		ys[i] = tp.record(node{op: stackPartOp{}, out: v, in: [4]*Tensor{y}, part: i})
	}
}

// linearStackOp is LinearStack's node: in = x, w (P stacked weights), out
// the (P, ..., out) activation whose blocks the parts view.
type linearStackOp struct{}

func (linearStackOp) backward(tp *Tape, n *node) {
	be, dy := tp.be, n.out.grad
	x, w := n.in[0], n.in[1]
	P := n.parts
	m, out, inDim := x.Rows(), w.shape[0]/P, w.shape[1]
	for i := range P {
		if n.partsIn&(1<<i) == 0 {
			be.Fill(tp.block(dy, i, P), 0)
		}
	}
	if dx, acc := tp.overwriteGrad(x); dx != nil {
		for i := P - 1; i >= 0; i-- { // the order of P Linear nodes' backward
			be.Gemm(false, false, 1, m, inDim, out, 1, tp.block(dy, i, P), tp.block(w, i, P), beta(acc), dx) // dx (+)= dY_i W_i
			acc = true
		}
	}
	if dw := tp.accumGrad(w); dw != nil {
		be.GemmStrided(true, false, P, out, inDim, m, 1, dy, m*out, x, 0, 1, dw, out*inDim) // dW_i += dY_i^T x
	}
}

// stackPartOp is part n.part of a LinearStack: a view of the stack's output
// whose gradient is its block of the stack's gradient (see Tape.ensureGrad).
type stackPartOp struct{}

// isStackPart reports whether o is a LinearStack part.
func isStackPart(o op) bool {
	_, ok := o.(stackPartOp)
	return ok
}

func (stackPartOp) backward(tp *Tape, n *node) {
	// The part's gradient is its block of the stack's: nothing moves. A gradient handed out
	// but never written must read as zero there; the stack's backward zeroes the blocks of
	// parts that never got one.
	if !n.out.gradReady {
		tp.be.Fill(n.out.grad, 0)
	}
	tp.nodes[n.in[0].node].partsIn |= 1 << n.part
}

// maxStackParts bounds LinearStack's parts: the stack's node records which
// parts received a gradient in one bit each.
const maxStackParts = 8

// block is part i of P equal consecutive blocks of t, as a flat view (for
// backward kernels, which read only storage, offset and size).
func (tp *Tape) block(t *Tensor, i, P int) *Tensor {
	b := tp.newTensor()
	b.ndim, b.size, b.name = 1, t.size/P, t.name+".block"
	b.shape[0] = b.size
	b.st, b.off = t.st, t.off+i*b.size
	return b
}
