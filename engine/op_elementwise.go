package engine

// Add is a + b for tensors of one shape (the residual connection). Saves
// nothing.
func (tp *Tape) Add(a, b *Tensor) *Tensor {
	return tp.binary("Add", BinaryAdd, a, b)
}

// Sub is a - b; b has a's shape or is a single element (broadcast).
// Saves nothing.
func (tp *Tape) Sub(a, b *Tensor) *Tensor { return tp.binary("Sub", BinarySub, a, b) }

// Mul is a * b elementwise; b has a's shape or is a single element.
// Saves a and b.
func (tp *Tape) Mul(a, b *Tensor) *Tensor { return tp.binary("Mul", BinaryMul, a, b) }

// Div is a / b elementwise; b has a's shape or is a single element.
// Saves a and b.
func (tp *Tape) Div(a, b *Tensor) *Tensor { return tp.binary("Div", BinaryDiv, a, b) }

func (tp *Tape) binary(name string, op BinaryOp, a, b *Tensor) *Tensor {
	if !tp.usable(name, a, b) {
		return tp.placeholder()
	}
	if !SameShape(a, b) && (op == BinaryAdd || b.size != 1) {
		return tp.failf(name, "%v and %v: shapes differ", a, b)
	}
	y, ok := tp.alloc(name, a.Shape()...)
	if !ok {
		return y
	}
	tp.be.Binary(op, y, a, b)
	return tp.record(node{op: binaryOp{}, out: y, in: [4]*Tensor{a, b}, binary: op})
}

// binaryOp is the node of Add, Sub, Mul and Div: in = a, b; binary says which.
type binaryOp struct{}

func (binaryOp) backward(tp *Tape, n *node) {
	a, b, dy := n.in[0], n.in[1], n.out.grad
	if n.binary == BinaryAdd && a != b {
		// The residual connection: dy passes to both inputs unchanged.
		for _, t := range n.in[:2] {
			if d, acc := tp.overwriteGrad(t); d != nil {
				if acc {
					tp.be.Axpy(d, 1, dy)
				} else {
					tp.be.Copy2D(d, 0, dy.size, dy, 0, dy.size, 1, dy.size, false)
				}
			}
		}
		return
	}
	tp.be.BinaryBackward(n.binary, tp.accumGrad(a), tp.accumGrad(b), dy, a, b)
}

// Scale is c * x. Saves nothing.
func (tp *Tape) Scale(x *Tensor, c float32) *Tensor { return tp.unary("Scale", UnaryScale, x, c) }

// AddScalar is x + c. Saves nothing.
func (tp *Tape) AddScalar(x *Tensor, c float32) *Tensor {
	return tp.unary("AddScalar", UnaryAddScalar, x, c)
}

// Exp is exp(x) elementwise. Saves its output.
func (tp *Tape) Exp(x *Tensor) *Tensor { return tp.unary("Exp", UnaryExp, x, 0) }

// Log is log(x) elementwise (-Inf at 0). Saves x.
func (tp *Tape) Log(x *Tensor) *Tensor { return tp.unary("Log", UnaryLog, x, 0) }

// Square is x^2 elementwise. Saves x.
func (tp *Tape) Square(x *Tensor) *Tensor { return tp.unary("Square", UnarySquare, x, 0) }

// Sqrt is sqrt(x) elementwise. Saves its output.
func (tp *Tape) Sqrt(x *Tensor) *Tensor { return tp.unary("Sqrt", UnarySqrt, x, 0) }

func (tp *Tape) unary(name string, op UnaryOp, x *Tensor, c float32) *Tensor {
	if !tp.usable(name, x) {
		return tp.placeholder()
	}
	y, ok := tp.alloc(name, x.Shape()...)
	if !ok {
		return y
	}
	tp.be.Unary(op, y, x, c)
	return tp.record(node{op: unaryOp{}, out: y, in: [4]*Tensor{x}, unary: op, c: c})
}

// unaryOp is the node of Scale, AddScalar, Exp, Log, Square and Sqrt:
// in = x; unary says which, c is its constant.
type unaryOp struct{}

func (unaryOp) backward(tp *Tape, n *node) {
	tp.be.UnaryBackward(n.unary, tp.accumGrad(n.in[0]), n.out.grad, n.in[0], n.out, n.c)
}

// DivExp is x / exp(logT) with logT a single element: scores divided by a
// learned temperature held as its logarithm. x: any, logT: (1) -> x's shape.
// Saves what Exp and Mul save (it is their composition).
func (tp *Tape) DivExp(x, logT *Tensor) *Tensor {
	if !tp.usable("DivExp", x, logT) {
		return tp.placeholder()
	}
	if logT.size != 1 {
		return tp.failf("DivExp", "log-temperature %v is not a single element", logT)
	}
	return tp.Mul(x, tp.Exp(tp.Scale(logT, -1)))
}
