package engine

// KernelCrossEntropy names VocabCrossEntropy's fused kernels, a
// CrossEntropyKernels.
const KernelCrossEntropy = "xent"

// CrossEntropyKernels are VocabCrossEntropy's fused kernels, run on one
// chunk of rows at a time (the logits of a chunk come from the backend's GEMM).
type CrossEntropyKernels struct {
	// Forward: logits: (c, V), targets: (c) -> lse: (c) = log sum_v
	// exp(logits[r, v]), nll: (c) = lse[r] - logits[r, targets[r]].
	Forward func(nll, lse, logits, targets *Tensor)
	// Backward turns logits: (c, V) in place into their gradient,
	// scale * dy * (softmax(logits[r]) - onehot(targets[r])), from the
	// forward's lse and the scalar dy.
	Backward func(logits, lse, targets, dy *Tensor, scale float32)
}

// CrossEntropyChunk is the number of rows whose logits VocabCrossEntropy
// holds at once: (CrossEntropyChunk, V) floats instead of (T, V), and each
// chunk's GEMMs are still large enough to run at full speed.
const CrossEntropyChunk = 128

// VocabCrossEntropy is the mean over tokens of -log softmax(h W^T)[target]:
// h: (..., d) hidden rows (T of them), w: (V, d) the output embedding (the
// input embedding table itself when tied), targets: T ids in [0, V) ->
// scalar (). The logits are computed CrossEntropyChunk rows at a time and
// never held whole; the backward recomputes each chunk's logits (one more
// GEMM) from the saved per-row log-sum-exp. Saves lse (T), the targets and
// one (chunk, V) scratch block.
func (tp *Tape) VocabCrossEntropy(h, w *Tensor, targets []int32) *Tensor {
	if !tp.usable("VocabCrossEntropy", h, w) {
		return tp.placeholder()
	}
	if w.ndim != 2 || h.ndim < 1 || h.Cols() != w.shape[1] {
		return tp.failf("VocabCrossEntropy", "hidden %v and output embedding %v: want (..., d) and (V, d)", h, w)
	}
	T, V := h.Rows(), w.shape[0]
	if len(targets) != T {
		return tp.failf("VocabCrossEntropy", "%d targets for %d hidden rows", len(targets), T)
	}
	tgt := tp.tokenIDs("VocabCrossEntropy", targets, V)
	if tp.err != nil {
		return tp.placeholder()
	}
	k, ok := kernel[CrossEntropyKernels](tp, KernelCrossEntropy)
	if !ok {
		return tp.placeholder()
	}
	lse, ok := tp.alloc("xent.lse", T)
	if !ok {
		return lse
	}
	nll, ok := tp.alloc("xent.nll", T)
	if !ok {
		return nll
	}
	logits, ok := tp.alloc("xent.logits", min(T, CrossEntropyChunk), V)
	if !ok {
		return logits
	}
	y, ok := tp.alloc("xent")
	if !ok {
		return y
	}
	d := w.shape[1]
	for r0 := 0; r0 < T; r0 += CrossEntropyChunk {
		c := min(CrossEntropyChunk, T-r0)
		lc := tp.rowView(logits, 0, c)
		// logits: (c, V) = h[r0:r0+c] (c, d) . w^T (d, V)
		tp.be.Gemm(false, true, 1, c, V, d, 1, tp.rowView(h, r0, c), w, 0, lc)
		k.Forward(tp.rowView(nll, r0, c), tp.rowView(lse, r0, c), lc, tp.rowView(tgt, r0, c))
	}
	tp.be.Reduce(ReduceSum, y, nll)
	tp.be.Unary(UnaryScale, y, y, 1/float32(T))
	return tp.record(node{op: crossEntropyOp{}, out: y, in: [4]*Tensor{h, w, tgt, logits}, saved: lse})
}

// crossEntropyOp is VocabCrossEntropy's node: in = h, w, targets (T), the
// logits scratch (chunk, V); saved = lse (T).
type crossEntropyOp struct{}

func (crossEntropyOp) backward(tp *Tape, n *node) {
	k, ok := kernel[CrossEntropyKernels](tp, KernelCrossEntropy)
	if !ok {
		return
	}
	h, w, tgt, logits := n.in[0], n.in[1], n.in[2], n.in[3]
	dh, dw := tp.accumGrad(h), tp.accumGrad(w)
	if dh == nil && dw == nil {
		return
	}
	T, V, d := h.Rows(), w.shape[0], w.shape[1]
	for r0 := 0; r0 < T; r0 += CrossEntropyChunk {
		c := min(CrossEntropyChunk, T-r0)
		lc, hc := tp.rowView(logits, 0, c), tp.rowView(h, r0, c)
		tp.be.Gemm(false, true, 1, c, V, d, 1, hc, w, 0, lc)
		k.Backward(lc, tp.rowView(n.saved, r0, c), tp.rowView(tgt, r0, c), n.out.grad, 1/float32(T))
		if dh != nil {
			// dh[r0:r0+c] (c, d) += dlogits (c, V) . w (V, d)
			tp.be.Gemm(false, false, 1, c, d, V, 1, lc, w, 1, tp.rowView(dh, r0, c))
		}
		if dw != nil {
			// dw (V, d) += dlogits^T (V, c) . h[r0:r0+c] (c, d)
			tp.be.Gemm(true, false, 1, V, d, c, 1, lc, hc, 1, dw)
		}
	}
}

// rowView is rows [r0, r0+c) of t viewed as (c, cols), or (c) for a 1-D t;
// it shares t's storage and carries no gradient.
func (tp *Tape) rowView(t *Tensor, r0, c int) *Tensor {
	v := tp.newTensor()
	cols := t.Cols()
	if t.ndim == 1 {
		v.shape[0], v.ndim = c, 1
		cols = 1
	} else {
		v.shape[0], v.shape[1], v.ndim = c, cols, 2
	}
	v.size, v.st, v.off, v.name = c*cols, t.st, t.off+r0*cols, t.name
	return v
}
