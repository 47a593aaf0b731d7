package cuda

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// The language model's kernels (kernels/lm.cu, module lm.ptx) are optional
// at load time, each op on its own: a backend whose PTX lacks an op's entry
// points (lm.ptx not built yet, or built before the op's kernel was added)
// leaves that op unregistered, and the engine refuses it with its error
// naming the kernel (never a silent CPU fallback).

// lmModule is the PTX file of kernels/lm.cu.
const lmModule = "lm.ptx"

// optionalKernels maps each fused kernel registered only when its entry
// points are loaded to those entry points (all in lm.cu).
var optionalKernels = map[string][]string{
	engine.KernelRoPE:            {"ga_rope", "ga_rope_bwd"},
	engine.KernelCausalAttention: {"ga_causal_softmax", "ga_causal_recompute_p", "ga_causal_softmax_bwd"},
	engine.KernelEmbedding:       {"ga_embedding", "ga_embedding_bwd"},
	engine.KernelCrossEntropy:    {"ga_xent", "ga_xent_bwd"},
	engine.KernelSpanAttention:   {"ga_span_attention"},
}

// usableKernels is table without the optional kernels whose entry points
// are not loaded; an optional kernel with some but not all of its entry
// points loaded is an error (PTX built from another version of lm.cu).
func usableKernels(table map[string]any, loaded func(entry string) bool) (map[string]any, error) {
	out := make(map[string]any, len(table))
	for name, k := range table {
		entries, optional := optionalKernels[name]
		if !optional {
			out[name] = k
			continue
		}
		var missing []string
		for _, e := range entries {
			if !loaded(e) {
				missing = append(missing, e)
			}
		}
		switch len(missing) {
		case 0:
			out[name] = k
		case len(entries):
			// Not built yet: the op stays unregistered.
		default:
			return nil, fmt.Errorf("fused kernel %q: entry points %v not loaded but %d others are (stale %s? rebuild it with scripts/build-ptx.sh)",
				name, missing, len(entries)-len(missing), lmModule)
		}
	}
	return out, nil
}

// rope rotates each head's pairs (i, i+hd/2) of every row by its position's
// angle (engine.RoPEKernels.Forward). x, y: (M, heads*hd), table: (T, hd).
func (b *Backend) rope(y, x, table *engine.Tensor, heads int) {
	M, T, hd := x.Rows(), table.Dim(0), table.Dim(1)
	n := M * heads * (hd / 2)
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_rope", gridFor(n), blk, ptr(y), ptr(x), ptr(table), int64(M), int32(T), int32(heads), int32(hd))
}

// ropeBackward accumulates the inverse rotation of dy into dx.
func (b *Backend) ropeBackward(dx, dy, table *engine.Tensor, heads int) {
	M, T, hd := dy.Rows(), table.Dim(0), table.Dim(1)
	n := M * heads * (hd / 2)
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_rope_bwd", gridFor(n), blk, ptr(dx), ptr(dy), ptr(table), int64(M), int32(T), int32(heads), int32(hd))
}

// causalDims are the sizes of one causal attention call.
type causalDims struct {
	B, T, heads, kvHeads, hd int
	group                    int // query heads per kv head
	BG                       int // GEMM batch: B * kvHeads
	rows                     int // score rows: B * heads * T
	scale                    float32
}

// causalShape returns the sizes; the head-split kernels index in 32 bits,
// the score kernels count rows in 32 bits.
func (b *Backend) causalShape(q *engine.Tensor, heads, kvHeads int) causalDims {
	d := causalDims{B: q.Dim(0), T: q.Dim(1), heads: heads, kvHeads: kvHeads}
	d.hd = q.Dim(2) / heads
	d.group = heads / kvHeads
	d.BG = d.B * kvHeads
	d.rows = d.B * heads * d.T
	d.scale = float32(1 / math.Sqrt(float64(d.hd)))
	if int64(d.B)*int64(d.T)*int64(heads)*int64(max(d.hd, d.T)) >= 1<<31 {
		b.fail(fmt.Errorf("causal attention of %d sequences of %d, %d heads of %d: too large for 32-bit indexing", d.B, d.T, heads, d.hd))
	}
	return d
}

// splitHeads copies x (B, N, heads*dh) to (B, heads, N, dh) in slot.
func (b *Backend) splitHeads(slot int, x *engine.Tensor, B, N, heads, dh int) DevicePtr {
	n := B * N * heads * dh
	p := b.scratchPtr(slot, n)
	b.launch("ga_split_heads", gridFor(n), blk, p, ptr(x), DevicePtr(0), int32(B), int32(N), int32(heads), int32(dh))
	return p
}

// mergeHeads writes or adds (B, heads, N, dh) at src into y (B, N, heads*dh).
func (b *Backend) mergeHeads(y *engine.Tensor, src DevicePtr, B, N, heads, dh int, accumulate bool) {
	n := B * N * heads * dh
	b.launch("ga_merge_heads", gridFor(n), blk, ptr(y), src, int32(B), int32(N), int32(heads), int32(dh), b2i(accumulate))
}

// causalScores splits q (heads) and k, v (kvHeads) into heads and computes
// S = scale Qh Kh^T as B*kvHeads blocks of (group*T, T), that is
// (B*heads*T, T) score rows, in slotS.
func (b *Backend) causalScores(q, k, v *engine.Tensor, d causalDims) (qh, kh, vh, s DevicePtr) {
	qh = b.splitHeads(slotQ, q, d.B, d.T, d.heads, d.hd)
	kh = b.splitHeads(slotK, k, d.B, d.T, d.kvHeads, d.hd)
	vh = b.splitHeads(slotV, v, d.B, d.T, d.kvHeads, d.hd)
	s = b.scratchPtr(slotS, d.rows*d.T)
	if b.Err() == nil {
		b.gemm(false, true, d.BG, d.group*d.T, d.T, d.hd, d.scale, qh, kh, 0, s)
	}
	return qh, kh, vh, s
}

// causalAttention is causal grouped-query attention
// (engine.CausalAttentionKernels.Forward): q (B, T, heads*hd), k, v (B, T,
// kvHeads*hd) -> o (B, T, heads*hd), lse (B, heads, T). The products are
// strided-batched GEMMs over B*kvHeads, the softmax a kernel (lm.cu).
func (b *Backend) causalAttention(o, lse, q, k, v *engine.Tensor, heads, kvHeads int) {
	d := b.causalShape(q, heads, kvHeads)
	if d.B == 0 || d.T == 0 || !b.begin() {
		return
	}
	defer b.end()
	_, _, vh, s := b.causalScores(q, k, v, d)
	oh := b.scratchPtr(slotO, d.rows*d.hd)
	if b.Err() != nil {
		return
	}
	b.launch("ga_causal_softmax", warpRows(d.rows), blk, s, ptr(lse), int32(d.T), int32(d.rows))
	b.gemm(false, false, d.BG, d.group*d.T, d.hd, d.T, 1, s, vh, 0, oh) // Oh = P Vh
	b.mergeHeads(o, oh, d.B, d.T, d.heads, d.hd, false)
}

// causalAttentionBackward recomputes P from q, k and lse and accumulates dq,
// dk, dv (any may be nil). dK and dV of a kv head sum its group's query
// heads inside the GEMMs (their inner dimension is group*T).
func (b *Backend) causalAttentionBackward(dq, dk, dv, do, q, k, v, o, lse *engine.Tensor, heads, kvHeads int) {
	d := b.causalShape(q, heads, kvHeads)
	if d.B == 0 || d.T == 0 || (dq == nil && dk == nil && dv == nil) || !b.begin() {
		return
	}
	defer b.end()
	qh, kh, vh, p := b.causalScores(q, k, v, d)
	doh := b.splitHeads(slotO, do, d.B, d.T, d.heads, d.hd)
	if b.Err() != nil {
		return
	}
	gt := d.group * d.T
	b.launch("ga_causal_recompute_p", warpRows(d.rows), blk, p, ptr(lse), int32(d.T), int32(d.rows))
	if dv != nil { // dVh (T, hd) per kv head = P^T (T, group*T) . dOh (group*T, hd)
		dvh := b.scratchPtr(slotDV, d.BG*d.T*d.hd)
		b.gemm(true, false, d.BG, d.T, d.hd, gt, 1, p, doh, 0, dvh)
		b.mergeHeads(dv, dvh, d.B, d.T, d.kvHeads, d.hd, true)
	}
	if dq == nil && dk == nil {
		return
	}
	dp := b.scratchPtr(slotDP, d.rows*d.T)
	if b.Err() != nil {
		return
	}
	b.gemm(false, true, d.BG, gt, d.T, d.hd, 1, doh, vh, 0, dp) // dP = dOh Vh^T
	b.launch("ga_causal_softmax_bwd", warpRows(d.rows), blk, dp, p, ptr(do), ptr(o),
		int32(d.heads), int32(d.T), int32(d.hd), d.scale, int32(d.rows))
	if dq != nil { // dQh = dS Kh
		dqh := b.scratchPtr(slotDQ, d.rows*d.hd)
		b.gemm(false, false, d.BG, gt, d.hd, d.T, 1, dp, kh, 0, dqh)
		b.mergeHeads(dq, dqh, d.B, d.T, d.heads, d.hd, true)
	}
	if dk != nil { // dKh (T, hd) per kv head = dS^T (T, group*T) . Qh (group*T, hd)
		dkh := b.scratchPtr(slotDK, d.BG*d.T*d.hd)
		b.gemm(true, false, d.BG, d.T, d.hd, gt, 1, dp, qh, 0, dkh)
		b.mergeHeads(dk, dkh, d.B, d.T, d.kvHeads, d.hd, true)
	}
}

// embedding: y[t] = table[ids[t]]; table (V, d), ids (T) -> y (T, d).
func (b *Backend) embedding(y, table, ids *engine.Tensor) {
	T, d := ids.Size(), table.Dim(1)
	if T*d == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_embedding", gridFor(T*d), blk, ptr(y), ptr(table), ptr(ids), int32(T), int32(d))
}

// embeddingBuckets splits the vocabulary among this many thread blocks per
// column block in the embedding backward (more parallelism than one thread
// per column); any number gives the same, deterministic, sums.
const embeddingBuckets = 64

// embeddingBackward: dtable[ids[t]] += dy[t] for every t, each element of
// dtable summed by one thread in token order (the CPU's order).
func (b *Backend) embeddingBackward(dtable, dy, ids *engine.Tensor) {
	T, d := ids.Size(), dtable.Dim(1)
	if T*d == 0 || !b.begin() {
		return
	}
	defer b.end()
	grid := Dim3{X: uint32((d + gaBlock - 1) / gaBlock), Y: uint32(min(embeddingBuckets, dtable.Dim(0)))}
	b.launch("ga_embedding_bwd", grid, blk, ptr(dtable), ptr(dy), ptr(ids), int32(T), int32(d))
}

// crossEntropy: lse[r] = log sum_v exp(logits[r, v]), nll[r] = lse[r] -
// logits[r, targets[r]]; logits (c, V), targets, lse, nll (c). One block
// per row.
func (b *Backend) crossEntropy(nll, lse, logits, targets *engine.Tensor) {
	rows, V := logits.Dim(0), logits.Dim(1)
	if rows == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_xent", Dim3{X: uint32(rows)}, blk, ptr(nll), ptr(lse), ptr(logits), ptr(targets), int32(V))
}

// crossEntropyBackward turns logits (c, V) in place into scale * dy *
// (softmax - onehot(targets)); dy is the device scalar.
func (b *Backend) crossEntropyBackward(logits, lse, targets, dy *engine.Tensor, scale float32) {
	n := logits.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_xent_bwd", gridFor(n), blk, ptr(logits), ptr(lse), ptr(targets), ptr(dy), scale, int32(logits.Dim(1)), int64(n))
}

// spanMaxHeadDim is the widest head ga_span_attention takes (GA_SPAN_MAX_HD
// in lm.cu: each lane of a warp holds hd/32 columns in registers).
const spanMaxHeadDim = 256

// spanAttention is SpanAttention's kernel (engine.SpanAttentionKernel): one
// block per (query row, head), an online softmax per warp over its share of
// the keys, merged in warp order (lm.cu). o, q: (N, heads*hd); k, v: (N,
// kvHeads*hd); kc, vc: (P, kvHeads*hd) or nil when no span sees a cache row;
// spans: (N, 3), each row's [first, from, cached].
func (b *Backend) spanAttention(o, q, k, v, kc, vc, spans *engine.Tensor, heads, kvHeads int) {
	N, qw := q.Dim(0), q.Dim(1)
	hd := qw / heads
	if N == 0 || !b.begin() {
		return
	}
	defer b.end()
	if hd > spanMaxHeadDim {
		b.fail(fmt.Errorf("span attention: head width %d: the CUDA kernel takes at most %d", hd, spanMaxHeadDim))
		return
	}
	P := 0
	if kc != nil {
		P = kc.Dim(0)
	}
	if int64(N)*int64(heads) >= 1<<31 || int64(P)+int64(N) >= 1<<31 {
		b.fail(fmt.Errorf("span attention of %d rows, %d heads after a cache of %d rows: too large for one launch", N, heads, P))
		return
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	b.launch("ga_span_attention", Dim3{X: uint32(N * heads)}, blk, ptr(o), ptr(q), ptr(k), ptr(v), ptr(kc), ptr(vc), ptr(spans),
		int32(heads), int32(kvHeads), int32(hd), scale)
}
