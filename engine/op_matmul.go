package engine

// MatMul is the (batched) product op(a) op(b) of two activations, op(x) =
// x^T (last two dimensions) when the flag is set.
// a: (B, n, k) or (n, k), b: (B, k, m) or (k, m) (before transposition),
// both of the same rank -> (B, n, m) or (n, m).
// Saves a and b.
func (tp *Tape) MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	if !tp.usable("MatMul", a, b) {
		return tp.placeholder()
	}
	if a.ndim != b.ndim || a.ndim < 2 || a.ndim > 3 || (a.ndim == 3 && a.shape[0] != b.shape[0]) {
		return tp.failf("MatMul", "%v and %v: want both (n, k) or both (B, n, k)", a, b)
	}
	n, k := a.Dim(-2), a.Dim(-1)
	if transA {
		n, k = k, n
	}
	k2, m := b.Dim(-2), b.Dim(-1)
	if transB {
		k2, m = m, k2
	}
	if k != k2 {
		return tp.failf("MatMul", "%v (trans %v) times %v (trans %v): inner sizes %d and %d", a, transA, b, transB, k, k2)
	}
	batch := 1
	var y *Tensor
	var ok bool
	if a.ndim == 3 {
		batch = a.shape[0]
		y, ok = tp.alloc("matmul", batch, n, m)
	} else {
		y, ok = tp.alloc("matmul", n, m)
	}
	if !ok {
		return y
	}
	tp.be.Gemm(transA, transB, batch, n, m, k, 1, a, b, 0, y)
	return tp.record(node{op: matMulOp{}, out: y, in: [4]*Tensor{a, b}, transA: transA, transB: transB})
}

// matMulOp is MatMul's node: in = a, b; transA, transB as given.
type matMulOp struct{}

func (matMulOp) backward(tp *Tape, n *node) {
	be, dy := tp.be, n.out.grad
	a, b := n.in[0], n.in[1]
	tA, tB := n.transA, n.transB
	batch := 1
	if a.ndim == 3 {
		batch = a.shape[0]
	}
	rows, cols := n.out.Dim(-2), n.out.Dim(-1) // C = op(A) op(B): (rows, cols)
	k := a.Dim(-1)
	if tA {
		k = a.Dim(-2)
	}
	if da := tp.accumGrad(a); da != nil {
		// dop(A) = dC op(B)^T; if A was transposed, dA = op(B) dC^T.
		if !tA {
			be.Gemm(false, !tB, batch, rows, k, cols, 1, dy, b, 1, da)
		} else {
			be.Gemm(tB, true, batch, k, rows, cols, 1, b, dy, 1, da)
		}
	}
	if db := tp.accumGrad(b); db != nil {
		// dop(B) = op(A)^T dC; if B was transposed, dB = dC^T op(A).
		if !tB {
			be.Gemm(!tA, false, batch, k, cols, rows, 1, a, dy, 1, db)
		} else {
			be.Gemm(true, tA, batch, cols, k, rows, 1, dy, a, 1, db)
		}
	}
}

// Transpose swaps the last two dimensions: (B, n, m) -> (B, m, n) or
// (n, m) -> (m, n), copying. Saves nothing.
func (tp *Tape) Transpose(x *Tensor) *Tensor {
	if !tp.usable("Transpose", x) {
		return tp.placeholder()
	}
	if x.ndim < 2 || x.ndim > 3 {
		return tp.failf("Transpose", "%v: want rank 2 or 3", x)
	}
	dims := append([]int(nil), x.Shape()...)
	dims[x.ndim-1], dims[x.ndim-2] = dims[x.ndim-2], dims[x.ndim-1]
	y, ok := tp.alloc("transpose", dims...)
	if !ok {
		return y
	}
	tp.be.Transpose(y, x, false)
	return tp.record(node{op: transposeOp{}, out: y, in: [4]*Tensor{x}})
}

// transposeOp is Transpose's node: in = x.
type transposeOp struct{}

func (transposeOp) backward(tp *Tape, n *node) {
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		tp.be.Transpose(dx, n.out.grad, true)
	}
}
