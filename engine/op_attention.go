package engine

// KernelAttention names Attention's fused kernels, an AttentionKernels.
const KernelAttention = "attention"

// AttentionKernels are Attention's fused kernels.
type AttentionKernels struct {
	// Forward: q: (B, Nq, h), k, v: (B, Nk, h), mask: (B, Nk) or nil ->
	// o: (B, Nq, h) and lse: (B, heads, Nq), the log-sum-exp of each scaled,
	// masked score row (-Inf when every key is padded).
	Forward func(o, lse, q, k, v, mask *Tensor, heads int)
	// Backward accumulates dq, dk, dv from do, recomputing the
	// probabilities from q, k and lse.
	Backward func(dq, dk, dv, do, q, k, v, mask, o, lse *Tensor, heads int)
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
	if heads < 1 || h < 1 || h%heads != 0 {
		return tp.failf("Attention", "width %d is not divisible into %d heads", h, heads)
	}
	if keyMask != nil && (keyMask.ndim != 2 || keyMask.shape[0] != B || keyMask.shape[1] != Nk) {
		return tp.failf("Attention", "key mask %v: want (%d, %d)", keyMask, B, Nk)
	}
	kern, ok := kernel[AttentionKernels](tp, KernelAttention)
	if !ok {
		return tp.placeholder()
	}
	o, ok := tp.alloc("attention", B, Nq, h)
	if !ok {
		return o
	}
	lse, ok := tp.alloc("attention.lse", B, heads, Nq)
	if !ok {
		return lse
	}
	kern.Forward(o, lse, q, k, v, keyMask, heads)
	return tp.record(node{op: attentionOp{}, out: o, in: [4]*Tensor{q, k, v, keyMask}, saved: lse, heads: heads})
}

// attentionOp is Attention's node: in = q, k, v, key mask; saved = lse.
type attentionOp struct{}

func (attentionOp) backward(tp *Tape, n *node) {
	kern, ok := kernel[AttentionKernels](tp, KernelAttention)
	if !ok {
		return
	}
	q, k, v, mask := n.in[0], n.in[1], n.in[2], n.in[3]
	g := tp.accumGrad
	kern.Backward(g(q), g(k), g(v), n.out.grad, q, k, v, mask, n.out, n.saved, n.heads)
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
