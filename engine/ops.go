package engine

import (
	"fmt"
	"math"
)

// Op kinds recorded on the tape.
const (
	opLinear opKind = iota
	opRMSNorm
	opAttention
	opSwiGLU
	opAdd
	opBinary
	opUnary
	opPrependRow
	opBroadcast
	opTakeRow
	opMeanPool
	opMaskRows
	opL2Normalize
	opRowLSE
	opRowNorm
	opInfoNCE
	opReduce
	opMatMul
	opTranspose
	opBroadcastAdd
	opReshape
	opLinearStack
	opStackPart
)

// RMSNormEps is Llama-2's RMSNorm epsilon, 1e-5: the usual argument of
// Tape.RMSNorm (models take theirs from their config).
const RMSNormEps = 1e-5

// L2NormEps is the smallest norm L2Normalize divides by (as torch's F.normalize).
const L2NormEps = 1e-12

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
	return tp.record(node{op: opLinear, out: y, in: [4]*Tensor{x, w}})
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
	y = tp.record(node{op: opLinearStack, out: y, in: [4]*Tensor{x, w}, ints: [3]int{P}})
	for i := range ys {
		v := tp.newTensor()
		v.ndim, v.size, v.name = x.ndim, y.size/P, "linear_stack.part"
		copy(v.shape[:], y.shape[1:y.ndim])
		v.st, v.off = y.st, y.off+i*v.size
		ys[i] = tp.record(node{op: opStackPart, out: v, in: [4]*Tensor{y}, ints: [3]int{i}})
	}
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

// RMSNorm is y = x / sqrt(mean(x^2) + eps) * w over the last dimension,
// for a finite eps > 0 (RMSNormEps is Llama-2's).
// x: (..., h), w: (h) -> (..., h). Saves x, w and 1/rms per row (..., in
// the arena); the backward needs only those, not eps.
func (tp *Tape) RMSNorm(x, w *Tensor, eps float32) *Tensor {
	if !tp.usable("RMSNorm", x, w) {
		return tp.placeholder()
	}
	if w.ndim != 1 || x.ndim < 1 || x.Cols() != w.size {
		return tp.failf("RMSNorm", "x %v and weight %v: want x (..., %d)", x, w, w.size)
	}
	if !(eps > 0) || math.IsInf(float64(eps), 0) {
		// eps 0 would divide an all-zero row (zeroed padding) by zero.
		return tp.failf("RMSNorm", "eps %g: want a finite value > 0", eps)
	}
	y, ok := tp.alloc("rmsnorm", x.Shape()...)
	if !ok {
		return y
	}
	rstd, ok := tp.alloc("rmsnorm.rstd", x.Rows())
	if !ok {
		return rstd
	}
	tp.be.RMSNorm(y, rstd, x, w, eps)
	return tp.record(node{op: opRMSNorm, out: y, in: [4]*Tensor{x, w}, aux: [2]*Tensor{rstd}})
}

// Attention is multi-head scaled dot-product attention with a key-padding
// mask and no causal mask: per batch element and head j (columns
// j*h/heads .. (j+1)*h/heads), softmax(q k^T / sqrt(h/heads)) v.
// q: (B, Nq, h), k, v: (B, Nk, h), keyMask: (B, Nk) with 1 for real keys and
// 0 for padding, or nil when every key is real -> (B, Nq, h).
// Self-attention passes the same set for q, k and v sources (Nq = Nk);
// cross-attention passes slot queries and encoder rows. Padded keys get
// exactly zero weight (their content never matters) and zero gradient; a
// query whose keys are all padded gets a zero output.
// Saves q, k, v, the output and the log-sum-exp of every score row
// (B, heads, Nq); backward recomputes the probabilities from them instead of
// storing (B, heads, Nq, Nk).
func (tp *Tape) Attention(q, k, v, keyMask *Tensor, heads int) *Tensor {
	if !tp.usable("Attention", q, k, v, keyMask) {
		return tp.placeholder()
	}
	if q.ndim != 3 || k.ndim != 3 || !SameShape(k, v) || q.shape[0] != k.shape[0] || q.shape[2] != k.shape[2] {
		return tp.failf("Attention", "q %v, k %v, v %v: want q (B, Nq, h), k and v (B, Nk, h)", q, k, v)
	}
	B, Nq, Nk, h := q.shape[0], q.shape[1], k.shape[1], q.shape[2]
	if heads < 1 || h%heads != 0 {
		return tp.failf("Attention", "width %d is not divisible into %d heads", h, heads)
	}
	if keyMask != nil && (keyMask.ndim != 2 || keyMask.shape[0] != B || keyMask.shape[1] != Nk) {
		return tp.failf("Attention", "key mask %v: want (%d, %d)", keyMask, B, Nk)
	}
	o, ok := tp.alloc("attention", B, Nq, h)
	if !ok {
		return o
	}
	lse, ok := tp.alloc("attention.lse", B, heads, Nq)
	if !ok {
		return lse
	}
	tp.be.Attention(o, lse, q, k, v, keyMask, heads)
	return tp.record(node{op: opAttention, out: o, in: [4]*Tensor{q, k, v, keyMask}, aux: [2]*Tensor{lse}, ints: [3]int{heads}})
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
	y, ok := tp.alloc("swiglu", gate.Shape()...)
	if !ok {
		return y
	}
	tp.be.SwiGLU(y, gate, up)
	return tp.record(node{op: opSwiGLU, out: y, in: [4]*Tensor{gate, up}})
}

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
	return tp.record(node{op: opBinary, out: y, in: [4]*Tensor{a, b}, ints: [3]int{int(op)}})
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
	return tp.record(node{op: opUnary, out: y, in: [4]*Tensor{x}, ints: [3]int{int(op)}, f: [2]float32{c}})
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

// PrependCLS puts the vector cls in front of every set and extends the key
// mask with a real (1) column: x: (B, N, h), cls: (h), mask: (B, N) or nil
// -> (B, N+1, h) and mask (B, N+1) (all ones when mask is nil).
// Saves nothing.
func (tp *Tape) PrependCLS(x, cls, mask *Tensor) (*Tensor, *Tensor) {
	if !tp.usable("PrependCLS", x, cls, mask) {
		return tp.placeholder(), tp.placeholder()
	}
	if x.ndim != 3 || cls.size != x.shape[2] {
		return tp.failf("PrependCLS", "x %v and cls %v: want x (B, N, h), cls (h)", x, cls), tp.placeholder()
	}
	B, N, h := x.shape[0], x.shape[1], x.shape[2]
	if mask != nil && (mask.ndim != 2 || mask.shape[0] != B || mask.shape[1] != N) {
		return tp.failf("PrependCLS", "mask %v: want (%d, %d)", mask, B, N), tp.placeholder()
	}
	y, ok := tp.alloc("prepend_cls", B, N+1, h)
	if !ok {
		return y, tp.placeholder()
	}
	tp.be.PrependRow(y, x, cls)
	m2, ok := tp.alloc("prepend_cls.mask", B, N+1)
	if !ok {
		return y, m2
	}
	if mask == nil {
		tp.be.Fill(m2, 1)
	} else {
		one, ok := tp.alloc("one", 1)
		if !ok {
			return y, m2
		}
		tp.be.Fill(one, 1)
		tp.be.PrependRow(m2, mask, one)
	}
	return tp.record(node{op: opPrependRow, out: y, in: [4]*Tensor{x, cls}}), m2
}

// Broadcast repeats v over a new leading batch dimension (the decoder's slot
// queries): v: (S, h) -> (B, S, h). Saves nothing.
func (tp *Tape) Broadcast(v *Tensor, B int) *Tensor {
	if !tp.usable("Broadcast", v) {
		return tp.placeholder()
	}
	if v.ndim > 3 || B < 1 {
		return tp.failf("Broadcast", "%v over batch %d", v, B)
	}
	dims := append([]int{B}, v.Shape()...)
	y, ok := tp.alloc("broadcast", dims...)
	if !ok {
		return y
	}
	tp.be.Copy2D(y, 0, v.size, v, 0, 0, B, v.size, false)
	return tp.record(node{op: opBroadcast, out: y, in: [4]*Tensor{v}})
}

// TakeRow selects row i of every set: x: (B, N, h) -> (B, h) (the CLS state
// with i = 0). Saves nothing.
func (tp *Tape) TakeRow(x *Tensor, i int) *Tensor {
	if !tp.usable("TakeRow", x) {
		return tp.placeholder()
	}
	if x.ndim != 3 || i < 0 || i >= x.shape[1] {
		return tp.failf("TakeRow", "row %d of %v", i, x)
	}
	B, N, h := x.shape[0], x.shape[1], x.shape[2]
	y, ok := tp.alloc("take_row", B, h)
	if !ok {
		return y
	}
	tp.be.Copy2D(y, 0, h, x, i*h, N*h, B, h, false)
	return tp.record(node{op: opTakeRow, out: y, in: [4]*Tensor{x}, ints: [3]int{i}})
}

// MeanPool averages the real rows of every set: x: (B, N, h), mask: (B, N)
// (1 real, 0 padding) or nil -> (B, h). A set with no real row gives zeros.
// Saves the mask.
func (tp *Tape) MeanPool(x, mask *Tensor) *Tensor {
	if !tp.usable("MeanPool", x, mask) {
		return tp.placeholder()
	}
	if x.ndim != 3 || (mask != nil && (mask.ndim != 2 || mask.shape[0] != x.shape[0] || mask.shape[1] != x.shape[1])) {
		return tp.failf("MeanPool", "x %v, mask %v: want (B, N, h) and (B, N)", x, mask)
	}
	y, ok := tp.alloc("mean_pool", x.shape[0], x.shape[2])
	if !ok {
		return y
	}
	tp.be.MeanPool(y, x, mask)
	return tp.record(node{op: opMeanPool, out: y, in: [4]*Tensor{x, mask}})
}

// MaskRows zeroes the padded rows of every set: x: (B, N, h), mask: (B, N)
// -> (B, N, h); padded rows get zero gradient. Saves the mask.
func (tp *Tape) MaskRows(x, mask *Tensor) *Tensor {
	if !tp.usable("MaskRows", x, mask) {
		return tp.placeholder()
	}
	if x.ndim != 3 || mask.ndim != 2 || mask.shape[0] != x.shape[0] || mask.shape[1] != x.shape[1] {
		return tp.failf("MaskRows", "x %v, mask %v: want (B, N, h) and (B, N)", x, mask)
	}
	y, ok := tp.alloc("mask_rows", x.Shape()...)
	if !ok {
		return y
	}
	tp.be.ScaleRows(y, x, mask, false)
	return tp.record(node{op: opMaskRows, out: y, in: [4]*Tensor{x, mask}})
}

// L2Normalize scales every row to unit Euclidean norm, x / max(||x||, 1e-12).
// x: (..., e) -> (..., e). Saves its output and the row norms (...).
func (tp *Tape) L2Normalize(x *Tensor) *Tensor {
	if !tp.usable("L2Normalize", x) {
		return tp.placeholder()
	}
	y, ok := tp.alloc("l2_normalize", x.Shape()...)
	if !ok {
		return y
	}
	norm, ok := tp.alloc("l2_normalize.norm", x.Rows())
	if !ok {
		return norm
	}
	tp.be.L2Normalize(y, norm, x, L2NormEps)
	return tp.record(node{op: opL2Normalize, out: y, in: [4]*Tensor{x}, aux: [2]*Tensor{norm}})
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
	y, ok := tp.alloc(name, x.shape[:x.ndim-1]...)
	if !ok {
		return y
	}
	tp.be.RowReduce(op, y, x)
	kind := opRowLSE
	if op == RowNorm {
		kind = opRowNorm
	}
	return tp.record(node{op: kind, out: y, in: [4]*Tensor{x}, ints: [3]int{int(op)}})
}

// Cosine is the matrix of cosine similarities between the rows of a and b:
// a: (M, e), b: (C, e) -> (M, C). It is L2Normalize on both and a MatMul,
// and saves what those save.
func (tp *Tape) Cosine(a, b *Tensor) *Tensor {
	if !tp.usable("Cosine", a, b) {
		return tp.placeholder()
	}
	if a.ndim != 2 || b.ndim != 2 || a.shape[1] != b.shape[1] {
		return tp.failf("Cosine", "%v and %v: want (M, e) and (C, e)", a, b)
	}
	return tp.MatMul(tp.L2Normalize(a), tp.L2Normalize(b), false, true)
}

// CosineScores is Cosine(a, b) / tau: the retrieval scores of SPEC §5 with a
// fixed temperature. a: (M, e), b: (C, e) -> (M, C).
func (tp *Tape) CosineScores(a, b *Tensor, tau float32) *Tensor {
	if tau <= 0 || math.IsNaN(float64(tau)) || math.IsInf(float64(tau), 0) {
		return tp.failf("CosineScores", "temperature %g is not a positive number", tau)
	}
	return tp.Scale(tp.Cosine(a, b), 1/tau)
}

// CosineScoresLearned is Cosine(a, b) / exp(logTau) with a learned
// log-temperature parameter logTau: (1). a: (M, e), b: (C, e) -> (M, C).
func (tp *Tape) CosineScoresLearned(a, b, logTau *Tensor) *Tensor {
	return tp.DivExp(tp.Cosine(a, b), logTau)
}

// InfoNCE is the multi-positive InfoNCE loss of SPEC §5 averaged over rows:
// L = mean_b [ log sum_{c} exp(s_bc) - log sum_{p in P_b} exp(s_bp) ].
// scores: (B, C); pos: (B, C) with 1 where candidate c is a positive of
// example b, 0 elsewhere (PositiveMask builds it) -> scalar ().
// A row without positives contributes +Inf. Saves scores and pos; backward
// recomputes the two softmaxes.
func (tp *Tape) InfoNCE(scores, pos *Tensor) *Tensor {
	if !tp.usable("InfoNCE", scores, pos) {
		return tp.placeholder()
	}
	if scores.ndim != 2 || !SameShape(scores, pos) {
		return tp.failf("InfoNCE", "scores %v and positives %v: want both (B, C)", scores, pos)
	}
	y, ok := tp.alloc("infonce")
	if !ok {
		return y
	}
	tp.be.InfoNCE(y, scores, pos)
	return tp.record(node{op: opInfoNCE, out: y, in: [4]*Tensor{scores, pos}})
}

// PositiveMask builds the (rows, cols) 0/1 tensor with row b set to 1 at the
// indices positives[b] (candidate indices into C), for InfoNCE. No gradient.
func (tp *Tape) PositiveMask(rows, cols int, positives [][]int) *Tensor {
	if tp.err != nil {
		return tp.placeholder()
	}
	if len(positives) != rows {
		return tp.failf("PositiveMask", "%d positive lists for %d rows", len(positives), rows)
	}
	host := make([]float32, rows*cols)
	for b, ps := range positives {
		for _, c := range ps {
			if c < 0 || c >= cols {
				return tp.failf("PositiveMask", "row %d: positive index %d outside [0, %d)", b, c, cols)
			}
			host[b*cols+c] = 1
		}
	}
	return tp.Input(host, rows, cols)
}

// KeyMask builds the (B, N) key-padding mask of sets with the given numbers
// of real rows: 1 for rows j < lengths[b], 0 after. No gradient.
func (tp *Tape) KeyMask(B, N int, lengths []int) *Tensor {
	if tp.err != nil {
		return tp.placeholder()
	}
	if len(lengths) != B {
		return tp.failf("KeyMask", "%d lengths for batch %d", len(lengths), B)
	}
	host := make([]float32, B*N)
	for b, n := range lengths {
		if n < 0 || n > N {
			return tp.failf("KeyMask", "set %d has %d rows, outside [0, %d]", b, n, N)
		}
		for j := range n {
			host[b*N+j] = 1
		}
	}
	return tp.Input(host, B, N)
}

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
	return tp.record(node{op: opReduce, out: y, in: [4]*Tensor{x}, ints: [3]int{int(op)}})
}

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
	return tp.record(node{op: opMatMul, out: y, in: [4]*Tensor{a, b}, ints: [3]int{boolInt(transA), boolInt(transB)}})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
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
	return tp.record(node{op: opTranspose, out: y, in: [4]*Tensor{x}})
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
	y, ok := tp.alloc("broadcast_add", x.Shape()...)
	if !ok {
		return y
	}
	tp.be.BroadcastAdd(y, x, col, row)
	return tp.record(node{op: opBroadcastAdd, out: y, in: [4]*Tensor{x, col, row}})
}

// padShape is lead followed by last, as a shape array.
func padShape(lead []int, last int) [maxDims]int {
	var s [maxDims]int
	copy(s[:], lead)
	s[len(lead)] = last
	return s
}

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
	return tp.record(node{op: opReshape, out: y, in: [4]*Tensor{x}})
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
// inputs' gradients (accumulated).
func (tp *Tape) backward(n *node) {
	be, dy := tp.be, n.out.grad
	in := n.in
	g := tp.accumGrad
	beta := func(accumulate bool) float32 {
		if accumulate {
			return 1
		}
		return 0
	}
	switch n.op {
	case opLinear:
		x, w := in[0], in[1]
		m, out, inDim := x.Rows(), w.shape[0], w.shape[1]
		if dx, acc := tp.overwriteGrad(x); dx != nil {
			be.Gemm(false, false, 1, m, inDim, out, 1, dy, w, beta(acc), dx) // dx (m, in) (+)= dy (m, out) W (out, in)
		}
		if dw := g(w); dw != nil {
			be.Gemm(true, false, 1, out, inDim, m, 1, dy, x, 1, dw) // dW (out, in) += dy^T x
		}
	case opRMSNorm:
		be.RMSNormBackward(g(in[0]), g(in[1]), dy, in[0], in[1], n.aux[0])
	case opAttention:
		be.AttentionBackward(g(in[0]), g(in[1]), g(in[2]), dy, in[0], in[1], in[2], in[3], n.out, n.aux[0], n.ints[0])
	case opSwiGLU:
		if in[0] == in[1] {
			// silu(x)*x: both terms land in one buffer. overwriteGrad would mark it ready before
			// the kernel wrote anything, so the first term would add to whatever a recycled buffer
			// held: clear it (when it holds no values yet) and add both terms.
			d := tp.accumGrad(in[0])
			be.SwiGLUBackward(d, d, dy, in[0], in[1], true, true)
			break
		}
		dg, accG := tp.overwriteGrad(in[0])
		du, accU := tp.overwriteGrad(in[1])
		be.SwiGLUBackward(dg, du, dy, in[0], in[1], accG, accU)
	case opBinary:
		op := BinaryOp(n.ints[0])
		if op == BinaryAdd && in[0] != in[1] {
			// The residual connection: dy passes to both inputs unchanged.
			for _, t := range in[:2] {
				if d, acc := tp.overwriteGrad(t); d != nil {
					if acc {
						be.Axpy(d, 1, dy)
					} else {
						be.Copy2D(d, 0, dy.size, dy, 0, dy.size, 1, dy.size, false)
					}
				}
			}
			break
		}
		be.BinaryBackward(op, g(in[0]), g(in[1]), dy, in[0], in[1])
	case opUnary:
		be.UnaryBackward(UnaryOp(n.ints[0]), g(in[0]), dy, in[0], n.out, n.f[0])
	case opPrependRow:
		x, cls := in[0], in[1]
		B, N1, h := n.out.shape[0], n.out.shape[1], n.out.shape[2]
		if dx := g(x); dx != nil { // rows 1..N of every set
			be.Copy2D(dx, 0, (N1-1)*h, dy, h, N1*h, B, (N1-1)*h, true)
		}
		if dc := g(cls); dc != nil { // row 0 of every set, summed over sets
			be.Copy2D(dc, 0, 0, dy, 0, N1*h, B, h, true)
		}
	case opBroadcast:
		v := in[0]
		if dv := g(v); dv != nil {
			be.Copy2D(dv, 0, 0, dy, 0, v.size, n.out.shape[0], v.size, true)
		}
	case opTakeRow:
		x := in[0]
		if dx := g(x); dx != nil {
			B, N, h := x.shape[0], x.shape[1], x.shape[2]
			be.Copy2D(dx, n.ints[0]*h, N*h, dy, 0, h, B, h, true)
		}
	case opMeanPool:
		if dx := g(in[0]); dx != nil {
			be.MeanPoolBackward(dx, dy, in[1])
		}
	case opMaskRows:
		if dx := g(in[0]); dx != nil {
			be.ScaleRows(dx, dy, in[1], true)
		}
	case opL2Normalize:
		if dx := g(in[0]); dx != nil {
			be.L2NormalizeBackward(dx, dy, n.out, n.aux[0], L2NormEps)
		}
	case opRowLSE, opRowNorm:
		if dx := g(in[0]); dx != nil {
			be.RowReduceBackward(RowOp(n.ints[0]), dx, dy, in[0], n.out)
		}
	case opInfoNCE:
		if ds := g(in[0]); ds != nil {
			be.InfoNCEBackward(ds, dy, in[0], in[1])
		}
	case opReduce:
		if dx := g(in[0]); dx != nil {
			be.ReduceBackward(ReduceOp(n.ints[0]), dx, dy, in[0])
		}
	case opMatMul:
		a, b := in[0], in[1]
		tA, tB := n.ints[0] == 1, n.ints[1] == 1
		batch := 1
		if a.ndim == 3 {
			batch = a.shape[0]
		}
		rows, cols := n.out.Dim(-2), n.out.Dim(-1) // C = op(A) op(B): (rows, cols)
		k := a.Dim(-1)
		if tA {
			k = a.Dim(-2)
		}
		if da := g(a); da != nil {
			// dop(A) = dC op(B)^T; if A was transposed, dA = op(B) dC^T.
			if !tA {
				be.Gemm(false, !tB, batch, rows, k, cols, 1, dy, b, 1, da)
			} else {
				be.Gemm(tB, true, batch, k, rows, cols, 1, b, dy, 1, da)
			}
		}
		if db := g(b); db != nil {
			// dop(B) = op(A)^T dC; if B was transposed, dB = dC^T op(A).
			if !tB {
				be.Gemm(!tA, false, batch, k, cols, rows, 1, a, dy, 1, db)
			} else {
				be.Gemm(true, tA, batch, cols, k, rows, 1, dy, a, 1, db)
			}
		}
	case opTranspose:
		if dx := g(in[0]); dx != nil {
			be.Transpose(dx, dy, true)
		}
	case opBroadcastAdd:
		be.BroadcastAddBackward(g(in[0]), g(in[1]), g(in[2]), dy)
	case opReshape:
		if dx := g(in[0]); dx != nil {
			be.Axpy(dx, 1, dy)
		}
	case opStackPart:
		// The part's gradient is its block of the stack's (see ensureGrad): nothing moves. A
		// gradient handed out but never written must read as zero there; the stack's backward
		// zeroes the blocks of parts that never got one.
		if !n.out.gradReady {
			be.Fill(dy, 0)
		}
		tp.nodes[in[0].node].ints[1] |= 1 << n.ints[0]
	case opLinearStack:
		x, w := in[0], in[1]
		P := n.ints[0]
		m, out, inDim := x.Rows(), w.shape[0]/P, w.shape[1]
		for i := range P {
			if n.ints[1]&(1<<i) == 0 {
				be.Fill(tp.block(dy, i, P), 0)
			}
		}
		if dx, acc := tp.overwriteGrad(x); dx != nil {
			for i := P - 1; i >= 0; i-- { // the order of P Linear nodes' backward
				be.Gemm(false, false, 1, m, inDim, out, 1, tp.block(dy, i, P), tp.block(w, i, P), beta(acc), dx) // dx (+)= dY_i W_i
				acc = true
			}
		}
		if dw := g(w); dw != nil {
			be.GemmStrided(true, false, P, out, inDim, m, 1, dy, m*out, x, 0, 1, dw, out*inDim) // dW_i += dY_i^T x
		}
	default:
		tp.fail(fmt.Errorf("engine: backward of unknown op %d", n.op))
	}
}
