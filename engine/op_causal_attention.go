package engine

// KernelCausalAttention names CausalAttention's fused kernels, a
// CausalAttentionKernels.
const KernelCausalAttention = "causal_attention"

// CausalAttentionKernels are CausalAttention's fused kernels.
type CausalAttentionKernels struct {
	// Forward: q: (B, T, heads*hd), k, v: (B, T, kvHeads*hd) -> o: (B, T,
	// heads*hd) and lse: (B, heads, T), the log-sum-exp of each scaled
	// score row over keys 0..t.
	Forward func(o, lse, q, k, v *Tensor, heads, kvHeads int)
	// Backward accumulates dq, dk, dv from do, recomputing the
	// probabilities from q, k and lse.
	Backward func(dq, dk, dv, do, q, k, v, o, lse *Tensor, heads, kvHeads int)
}

// CausalAttention is multi-head scaled dot-product self-attention in which
// query t sees keys 0..t of its own sequence only, with grouped-query
// attention: query head j (columns j*hd .. (j+1)*hd of q) reads key/value
// head j / (heads/kvHeads) (kvHeads = heads is plain multi-head attention).
// Per sequence and head, softmax(q k^T / sqrt(hd) + causal mask) v.
// q: (B, T, heads*hd), k, v: (B, T, kvHeads*hd) -> (B, T, heads*hd).
// A separate op rather than a flag on Attention, so Attention's kernels
// (and the set models' numbers) stay as they are; it has no key-padding
// mask because a decoder's batches are full sequences. Later positions get
// exactly zero weight: no output row depends on a later input.
// Saves q, k, v, the output and the log-sum-exp of every score row
// (B, heads, T); backward recomputes the probabilities from them.
func (tp *Tape) CausalAttention(q, k, v *Tensor, heads, kvHeads int) *Tensor {
	if !tp.usable("CausalAttention", q, k, v) {
		return tp.placeholder()
	}
	if q.ndim != 3 || k.ndim != 3 || !SameShape(k, v) || q.shape[0] != k.shape[0] || q.shape[1] != k.shape[1] {
		return tp.failf("CausalAttention", "q %v, k %v, v %v: want q (B, T, heads*hd), k and v (B, T, kvHeads*hd)", q, k, v)
	}
	B, T, qw, kw := q.shape[0], q.shape[1], q.shape[2], k.shape[2]
	if heads < 1 || kvHeads < 1 || heads%kvHeads != 0 || qw%heads != 0 || kw%kvHeads != 0 || qw/heads != kw/kvHeads || qw == 0 {
		return tp.failf("CausalAttention", "q width %d, k width %d, %d heads, %d kv heads: want kv heads dividing heads and one head width", qw, kw, heads, kvHeads)
	}
	kern, ok := kernel[CausalAttentionKernels](tp, KernelCausalAttention)
	if !ok {
		return tp.placeholder()
	}
	o, ok := tp.alloc("causal_attention", B, T, qw)
	if !ok {
		return o
	}
	lse, ok := tp.alloc("causal_attention.lse", B, heads, T)
	if !ok {
		return lse
	}
	kern.Forward(o, lse, q, k, v, heads, kvHeads)
	return tp.record(node{op: causalAttentionOp{}, out: o, in: [4]*Tensor{q, k, v}, saved: lse, heads: heads})
}

// causalAttentionOp is CausalAttention's node: in = q, k, v; saved = lse.
// The kv head count is k's width over the head width (q's over heads).
type causalAttentionOp struct{}

func (causalAttentionOp) backward(tp *Tape, n *node) {
	kern, ok := kernel[CausalAttentionKernels](tp, KernelCausalAttention)
	if !ok {
		return
	}
	q, k, v := n.in[0], n.in[1], n.in[2]
	kvHeads := k.shape[2] / (q.shape[2] / n.heads)
	g := tp.accumGrad
	kern.Backward(g(q), g(k), g(v), n.out.grad, q, k, v, n.out, n.saved, n.heads, kvHeads)
}
