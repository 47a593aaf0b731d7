package engine

import "math"

// L2NormEps is the smallest norm L2Normalize divides by (as torch's F.normalize).
const L2NormEps = 1e-12

// KernelL2Normalize names L2Normalize's fused kernels, an L2NormalizeKernels.
const KernelL2Normalize = "l2_normalize"

// L2NormalizeKernels are L2Normalize's fused kernels.
type L2NormalizeKernels struct {
	// Forward: x: (M, e) -> y = x / max(||x||, eps), norm: (M) = ||x||.
	Forward func(y, norm, x *Tensor, eps float32)
	// Backward accumulates dx from dy, the output y and norm.
	Backward func(dx, dy, y, norm *Tensor, eps float32)
}

// L2Normalize scales every row to unit Euclidean norm, x / max(||x||, 1e-12).
// x: (..., e) -> (..., e). Saves its output and the row norms (...).
func (tp *Tape) L2Normalize(x *Tensor) *Tensor {
	if !tp.usable("L2Normalize", x) {
		return tp.placeholder()
	}
	k, ok := kernel[L2NormalizeKernels](tp, KernelL2Normalize)
	if !ok {
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
	k.Forward(y, norm, x, L2NormEps)
	return tp.record(node{op: l2NormalizeOp{}, out: y, in: [4]*Tensor{x}, saved: norm})
}

// l2NormalizeOp is L2Normalize's node: in = x; saved = the row norms.
type l2NormalizeOp struct{}

func (l2NormalizeOp) backward(tp *Tape, n *node) {
	k, ok := kernel[L2NormalizeKernels](tp, KernelL2Normalize)
	if !ok {
		return
	}
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		k.Backward(dx, n.out.grad, n.out, n.saved, L2NormEps)
	}
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
