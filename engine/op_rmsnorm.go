package engine

import "math"

// RMSNormEps is Llama-2's RMSNorm epsilon, 1e-5: the usual argument of
// Tape.RMSNorm (models take theirs from their config).
const RMSNormEps = 1e-5

// KernelRMSNorm names RMSNorm's fused kernels, an RMSNormKernels.
const KernelRMSNorm = "rmsnorm"

// RMSNormKernels are RMSNorm's fused kernels.
type RMSNormKernels struct {
	// Forward: x: (M, h), w: (h) -> y: (M, h), rstd: (M) = 1/sqrt(mean x^2 + eps).
	Forward func(y, rstd, x, w *Tensor, eps float32)
	// Backward accumulates dx: (M, h) and dw: (h) from dy.
	Backward func(dx, dw, dy, x, w, rstd *Tensor)
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
	k, ok := kernel[RMSNormKernels](tp, KernelRMSNorm)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("rmsnorm", x.Shape()...)
	if !ok {
		return y
	}
	rstd, ok := tp.alloc("rmsnorm.rstd", x.Rows())
	if !ok {
		return rstd
	}
	k.Forward(y, rstd, x, w, eps)
	return tp.record(node{op: rmsNormOp{}, out: y, in: [4]*Tensor{x, w}, saved: rstd})
}

// rmsNormOp is RMSNorm's node: in = x, w; saved = rstd.
type rmsNormOp struct{}

func (rmsNormOp) backward(tp *Tape, n *node) {
	k, ok := kernel[RMSNormKernels](tp, KernelRMSNorm)
	if !ok {
		return
	}
	x, w := n.in[0], n.in[1]
	k.Backward(tp.accumGrad(x), tp.accumGrad(w), n.out.grad, x, w, n.saved)
}
