package engine

// KernelMeanPool names MeanPool's fused kernels, a MeanPoolKernels.
const KernelMeanPool = "mean_pool"

// MeanPoolKernels are MeanPool's fused kernels.
type MeanPoolKernels struct {
	// Forward: x: (B, N, h), mask: (B, N) or nil -> y: (B, h).
	Forward func(y, x, mask *Tensor)
	// Backward accumulates dx: (B, N, h) from dy: (B, h).
	Backward func(dx, dy, mask *Tensor)
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
	k, ok := kernel[MeanPoolKernels](tp, KernelMeanPool)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("mean_pool", x.shape[0], x.shape[2])
	if !ok {
		return y
	}
	k.Forward(y, x, mask)
	return tp.record(node{op: meanPoolOp{}, out: y, in: [4]*Tensor{x, mask}})
}

// meanPoolOp is MeanPool's node: in = x, mask.
type meanPoolOp struct{}

func (meanPoolOp) backward(tp *Tape, n *node) {
	k, ok := kernel[MeanPoolKernels](tp, KernelMeanPool)
	if !ok {
		return
	}
	if dx := tp.accumGrad(n.in[0]); dx != nil {
		k.Backward(dx, n.out.grad, n.in[1])
	}
}
