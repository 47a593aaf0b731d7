package engine

// SumSquares is the sum of the squares of all elements (the squared
// Frobenius norm): any -> scalar (). Saves x.
func (tp *Tape) SumSquares(x *Tensor) *Tensor { return tp.reduce("SumSquares", ReduceSumSquares, x) }

// Sum is the sum of all elements: any -> scalar (). Saves nothing.
func (tp *Tape) Sum(x *Tensor) *Tensor { return tp.reduce("Sum", ReduceSum, x) }

// Mean is the mean of all elements: any -> scalar (). Saves nothing.
func (tp *Tape) Mean(x *Tensor) *Tensor {
	if !tp.usable("Mean", x) {
		return tp.placeholder()
	}
	if x.size == 0 {
		return tp.failf("Mean", "%v is empty", x)
	}
	return tp.Scale(tp.Sum(x), 1/float32(x.size))
}

// FrobeniusNorm is sqrt(SumSquares(x)): any -> scalar ().
func (tp *Tape) FrobeniusNorm(x *Tensor) *Tensor { return tp.Sqrt(tp.SumSquares(x)) }

func (tp *Tape) reduce(name string, op ReduceOp, x *Tensor) *Tensor {
	if !tp.usable(name, x) {
		return tp.placeholder()
	}
	y, ok := tp.alloc(name)
	if !ok {
		return y
	}
	tp.be.Reduce(op, y, x)
	return tp.record(node{op: reduceOp{}, out: y, in: [4]*Tensor{x}, reduce: op})
}

// reduceOp is the node of Sum and SumSquares: in = x; reduce says which.
type reduceOp struct{}

func (reduceOp) backward(tp *Tape, n *node) {
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		tp.be.ReduceBackward(n.reduce, dx, n.out.grad, n.in[0])
	}
}

// WeightedSum is sum_i weights[i] * xs[i] of scalars (the weighted sum of
// losses) -> scalar (). Saves nothing.
func (tp *Tape) WeightedSum(weights []float32, xs ...*Tensor) *Tensor {
	if !tp.usable("WeightedSum", xs...) {
		return tp.placeholder()
	}
	if len(weights) != len(xs) || len(xs) == 0 {
		return tp.failf("WeightedSum", "%d weights for %d terms", len(weights), len(xs))
	}
	var acc *Tensor
	for i, x := range xs {
		if x.size != 1 {
			return tp.failf("WeightedSum", "term %d %v is not a scalar", i, x)
		}
		t := tp.Scale(x, weights[i])
		if acc == nil {
			acc = t
		} else {
			acc = tp.Add(acc, t)
		}
	}
	return acc
}

// backward runs node n's backward kernels: gradients of n.out into its
