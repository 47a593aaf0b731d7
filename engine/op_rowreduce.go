package engine

// RowOp selects the per-row reduction of RowReduceKernels.
type RowOp int

// Per-row reductions over the last dimension.
const (
	RowLogSumExp RowOp = iota // log sum_j exp(x_j), stable
	RowNorm                   // sqrt(sum_j x_j^2)
)

// KernelRowReduce names the fused kernels of RowNorm and LogSumExp, a
// RowReduceKernels.
const KernelRowReduce = "row_reduce"

// RowReduceKernels are the fused kernels of RowNorm and LogSumExp.
type RowReduceKernels struct {
	// Forward: x: (M, C) -> y: (M).
	Forward func(op RowOp, y, x *Tensor)
	// Backward accumulates dx: (M, C) from dy: (M).
	Backward func(op RowOp, dx, dy, x, y *Tensor)
}

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
	k, ok := kernel[RowReduceKernels](tp, KernelRowReduce)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc(name, x.shape[:x.ndim-1]...)
	if !ok {
		return y
	}
	k.Forward(op, y, x)
	return tp.record(node{op: rowReduceOp{}, out: y, in: [4]*Tensor{x}, rowOp: op})
}

// rowReduceOp is the node of RowNorm and LogSumExp: in = x; rowOp says which.
type rowReduceOp struct{}

func (rowReduceOp) backward(tp *Tape, n *node) {
	k, ok := kernel[RowReduceKernels](tp, KernelRowReduce)
	if !ok {
		return
	}
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		k.Backward(n.rowOp, dx, n.out.grad, n.in[0], n.out)
	}
}
