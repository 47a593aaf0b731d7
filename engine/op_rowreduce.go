package engine

// RowNorm is the Euclidean norm of every row: x: (..., e) -> (...).
// Saves x and its output.
func (tp *Tape) RowNorm(x *Tensor) *Tensor {
	return tp.rowReduce("RowNorm", RowNorm, x)
}

// LogSumExp is the numerically stable log(sum_j exp(x_ij)) of every row
// (computed as max + log sum exp(x - max)): x: (..., C) -> (...).
// Saves x and its output. For columns, Transpose first.
func (tp *Tape) LogSumExp(x *Tensor) *Tensor {
	return tp.rowReduce("LogSumExp", RowLogSumExp, x)
}

func (tp *Tape) rowReduce(name string, op RowOp, x *Tensor) *Tensor {
	if !tp.usable(name, x) {
		return tp.placeholder()
	}
	if x.ndim < 1 {
		return tp.failf(name, "%v has no rows", x)
	}
	y, ok := tp.alloc(name, x.shape[:x.ndim-1]...)
	if !ok {
		return y
	}
	tp.be.RowReduce(op, y, x)
	return tp.record(node{op: rowReduceOp{}, out: y, in: [4]*Tensor{x}, rowOp: op})
}

// rowReduceOp is the node of RowNorm and LogSumExp: in = x; rowOp says which.
type rowReduceOp struct{}

func (rowReduceOp) backward(tp *Tape, n *node) {
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		tp.be.RowReduceBackward(n.rowOp, dx, n.out.grad, n.in[0], n.out)
	}
}
