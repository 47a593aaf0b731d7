package engine

// KernelBroadcastAdd names BroadcastAdd's fused kernels, a BroadcastAddKernels.
const KernelBroadcastAdd = "broadcast_add"

// BroadcastAddKernels are BroadcastAdd's fused kernels.
type BroadcastAddKernels struct {
	// Forward: y = x + col (per row) + row (per column), batched over
	// leading dimensions; col, row may be nil.
	Forward func(y, x, col, row *Tensor)
	// Backward accumulates dx, dcol (row sums of dy), drow (column sums of
	// dy); any may be nil.
	Backward func(dx, dcol, drow, dy *Tensor)
}

// BroadcastAdd adds a per-row and a per-column vector to a (batched) matrix,
// y_ij = x_ij + col_i + row_j (the log-domain Sinkhorn update).
// x: (..., M, C); col: (..., M) or nil; row: (..., C) or nil -> (..., M, C).
// Saves nothing.
func (tp *Tape) BroadcastAdd(x, col, row *Tensor) *Tensor {
	if !tp.usable("BroadcastAdd", x, col, row) {
		return tp.placeholder()
	}
	if x.ndim < 2 {
		return tp.failf("BroadcastAdd", "%v: want (..., M, C)", x)
	}
	M, C := x.Dim(-2), x.Dim(-1)
	lead := x.shape[:x.ndim-2]
	if col != nil && (col.ndim != x.ndim-1 || col.Dim(-1) != M || col.shape != padShape(lead, M)) {
		return tp.failf("BroadcastAdd", "column vector %v for %v: want (..., %d)", col, x, M)
	}
	if row != nil && (row.ndim != x.ndim-1 || row.Dim(-1) != C || row.shape != padShape(lead, C)) {
		return tp.failf("BroadcastAdd", "row vector %v for %v: want (..., %d)", row, x, C)
	}
	k, ok := kernel[BroadcastAddKernels](tp, KernelBroadcastAdd)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("broadcast_add", x.Shape()...)
	if !ok {
		return y
	}
	k.Forward(y, x, col, row)
	return tp.record(node{op: broadcastAddOp{}, out: y, in: [4]*Tensor{x, col, row}})
}

// broadcastAddOp is BroadcastAdd's node: in = x, col, row.
type broadcastAddOp struct{}

func (broadcastAddOp) backward(tp *Tape, n *node) {
	k, ok := kernel[BroadcastAddKernels](tp, KernelBroadcastAdd)
	if !ok {
		return
	}
	g := tp.accumGrad
	k.Backward(g(n.in[0]), g(n.in[1]), g(n.in[2]), n.out.grad)
}

// padShape is lead followed by last, as a shape array.
func padShape(lead []int, last int) [maxDims]int {
	var s [maxDims]int
	copy(s[:], lead)
	s[len(lead)] = last
	return s
}
