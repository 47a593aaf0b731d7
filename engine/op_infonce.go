package engine

// KernelInfoNCE names InfoNCE's fused kernels, an InfoNCEKernels.
const KernelInfoNCE = "infonce"

// InfoNCEKernels are InfoNCE's fused kernels.
type InfoNCEKernels struct {
	// Forward: scores, pos: (B, C) -> y: one element, the mean loss.
	Forward func(y, scores, pos *Tensor)
	// Backward accumulates dscores from the scalar dy.
	Backward func(dscores, dy, scores, pos *Tensor)
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
	k, ok := kernel[InfoNCEKernels](tp, KernelInfoNCE)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("infonce")
	if !ok {
		return y
	}
	k.Forward(y, scores, pos)
	return tp.record(node{op: infoNCEOp{}, out: y, in: [4]*Tensor{scores, pos}})
}

// infoNCEOp is InfoNCE's node: in = scores, pos.
type infoNCEOp struct{}

func (infoNCEOp) backward(tp *Tape, n *node) {
	k, ok := kernel[InfoNCEKernels](tp, KernelInfoNCE)
	if !ok {
		return
	}
	if ds := tp.accumGrad(n.in[0]); ds != nil {
		k.Backward(ds, n.out.grad, n.in[0], n.in[1])
	}
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
