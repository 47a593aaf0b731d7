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
// holds at once: (CrossEntropyChunk, V) floats instead of (T, V). Each
// chunk's (V, d) gradient GEMM reads and writes the whole of gw, so short
// chunks are bound by memory: on 2 cores the small decoder's step (T 2048,
// V 32000) ran 1.37x faster at 512 rows than at 128, and no faster at 1024.
const CrossEntropyChunk = 512

// VocabCrossEntropy is the mean over tokens of -log softmax(h W^T)[target]:
// h: (..., d) hidden rows (T of them), w: (V, d) the output embedding (the
// input embedding table itself when tied), targets: T ids in [0, V) ->
// scalar (). The logits are computed CrossEntropyChunk rows at a time and
// never held whole.
//
// When h or w needs a gradient (and the tape is not forward-only) the
// forward also turns each chunk's logits into their gradient for dy = 1,
// (softmax - onehot) / T, and multiplies it out at once: gh (T, d) =
// dlogits . w and gw (V, d) = sum over chunks of dlogits^T . h. The backward
// then only scales them by dy and adds them. Holding gh and gw (T·d + V·d
// floats) instead of recomputing each chunk's logits in the backward saves
// one (T, V, d) GEMM of the four, about 15% of the small decoder's step.
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
	var op crossEntropyOp
	var one *Tensor
	if !tp.forwardOnly && (h.needGrad || w.needGrad) {
		if one, ok = tp.alloc("xent.one"); !ok {
			return one
		}
		tp.be.Fill(one, 1)
		if h.needGrad {
			if op.gh, ok = tp.alloc("xent.gh", T, d); !ok {
				return op.gh
			}
		}
		if w.needGrad {
			if op.gw, ok = tp.alloc("xent.gw", V, d); !ok {
				return op.gw
			}
		}
	}
	for r0 := 0; r0 < T; r0 += CrossEntropyChunk {
		c := min(CrossEntropyChunk, T-r0)
		lc, hc := tp.rowView(logits, 0, c), tp.rowView(h, r0, c)
		// logits: (c, V) = h[r0:r0+c] (c, d) . w^T (d, V)
		tp.be.Gemm(false, true, 1, c, V, d, 1, hc, w, 0, lc)
		k.Forward(tp.rowView(nll, r0, c), tp.rowView(lse, r0, c), lc, tp.rowView(tgt, r0, c))
		if one == nil {
			continue
		}
		// lc becomes dlogits for dy = 1: (softmax - onehot) / T.
		k.Backward(lc, tp.rowView(lse, r0, c), tp.rowView(tgt, r0, c), one, 1/float32(T))
		if op.gh != nil {
			// gh[r0:r0+c] (c, d) = dlogits (c, V) . w (V, d)
			tp.be.Gemm(false, false, 1, c, d, V, 1, lc, w, 0, tp.rowView(op.gh, r0, c))
		}
		if op.gw != nil {
			// gw (V, d) (+)= dlogits^T (V, c) . h[r0:r0+c] (c, d)
			beta := float32(1)
			if r0 == 0 {
				beta = 0
			}
			tp.be.Gemm(true, false, 1, V, d, c, 1, lc, hc, beta, op.gw)
		}
	}
	tp.be.Reduce(ReduceSum, y, nll)
	tp.be.Unary(UnaryScale, y, y, 1/float32(T))
	return tp.record(node{op: op, out: y, in: [4]*Tensor{h, w}})
}

// crossEntropyOp is VocabCrossEntropy's node: in = h, w. gh (T, d) and gw
// (V, d) are the gradients for dy = 1 the forward prepared (nil: not needed,
// or a forward-only tape); the backward needs nothing else.
type crossEntropyOp struct {
	gh, gw *Tensor
}

func (op crossEntropyOp) backward(tp *Tape, n *node) {
	h, w := n.in[0], n.in[1]
	dh, dw := tp.accumGrad(h), tp.accumGrad(w)
	dy := n.out.grad // ()
	// The prepared gradients are linear in dy: scale them in place (each node's backward runs
	// once) and add them.
	if dh != nil && op.gh != nil {
		tp.be.Binary(BinaryMul, op.gh, op.gh, dy)
		tp.be.Axpy(dh, 1, op.gh)
	}
	if dw != nil && op.gw != nil {
		tp.be.Binary(BinaryMul, op.gw, op.gw, dy)
		tp.be.Axpy(dw, 1, op.gw)
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
