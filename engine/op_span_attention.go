package engine

import "fmt"

// KernelSpanAttention names SpanAttention's fused kernel, a
// SpanAttentionKernel.
const KernelSpanAttention = "span_attention"

// SpanAttentionKernel is SpanAttention's fused kernel (forward only): o: (N,
// heads*hd) from q: (N, heads*hd), k, v: (N, kvHeads*hd), the cache kc, vc:
// (P, kvHeads*hd) (nil when cached is 0) and first: (N), row r's span start
// as a float32 (exact below 2^24). Query row r, head j attends to cache
// rows 0..cached-1 and then to new rows first[r]..r of kv head
// j/(heads/kvHeads), in that order.
type SpanAttentionKernel func(o, q, k, v, kc, vc, first *Tensor, cached, heads, kvHeads int)

// maxSpanRows bounds N: span starts travel as float32, exact below 2^24.
const maxSpanRows = 1 << 24

// SpanAttention is a decoder's inference attention: multi-head scaled
// dot-product attention, softmax(q k^T / sqrt(hd)) v per head, with
// grouped-query heads (query head j reads kv head j/(heads/kvHeads)), where
// query row r sees the first cached rows of a KV cache and then the new rows
// first[r]..r:
//
//	q: (N, heads*hd), k, v: (N, kvHeads*hd) (the new rows' keys and values),
//	kc, vc: (P, kvHeads*hd), P >= cached (nil allowed when cached == 0)
//	-> (N, heads*hd)
//
// first is the span rule: first[0] = 0 and, for r > 0, first[r] is either
// first[r-1] (row r continues row r-1's span) or r (row r starts a span).
// The rows are so cut into consecutive spans, and each row sees its span up
// to itself, after the cache. One op covers:
//   - packed sequences without a cache (cached = 0, first[r] = the first row
//     of r's sequence): causal attention within each sequence;
//   - the next N tokens of one sequence (cached = its prefix, first[r] = 0);
//   - N alternative next tokens (cached = the prefix, first[r] = r): each
//     sees the prefix and itself only.
//
// The three uses agree to rounding: the last N rows of a pass over P+N rows
// without a cache equal N rows after a cache of the first P (the keys and
// values being the same) up to the order of the sums; on the CPU, where
// two calls make GEMMs of the same shapes (an alternative and that token
// alone after the cache, a packed sequence and that sequence alone) they
// agree bit for bit. Forward only: it refuses a tape that is not forward-only
// (SetForwardOnly), because it has no backward. Appending the new k, v to
// the cache is the caller's (CopyRows into buffers from NewBuffer).
func (tp *Tape) SpanAttention(q, k, v, kc, vc *Tensor, cached int, first []int32, heads, kvHeads int) *Tensor {
	if !tp.usable("SpanAttention", q, k, v, kc, vc) {
		return tp.placeholder()
	}
	if !tp.forwardOnly {
		return tp.failf("SpanAttention", "the tape is not forward-only: SpanAttention has no backward (call SetForwardOnly(true) on an inference tape)")
	}
	if q.ndim != 2 || k.ndim != 2 || !SameShape(k, v) || q.shape[0] != k.shape[0] || q.shape[0] < 1 {
		return tp.failf("SpanAttention", "q %v, k %v, v %v: want q (N, heads*hd), k and v (N, kvHeads*hd), N >= 1", q, k, v)
	}
	N, qw, kw := q.shape[0], q.shape[1], k.shape[1]
	if heads < 1 || kvHeads < 1 || heads%kvHeads != 0 || qw%heads != 0 || kw%kvHeads != 0 || qw/heads != kw/kvHeads || qw == 0 {
		return tp.failf("SpanAttention", "q width %d, k width %d, %d heads, %d kv heads: want kv heads dividing heads and one head width", qw, kw, heads, kvHeads)
	}
	if N >= maxSpanRows {
		return tp.failf("SpanAttention", "%d rows: want fewer than %d", N, maxSpanRows)
	}
	if cached < 0 {
		return tp.failf("SpanAttention", "cached = %d: want >= 0", cached)
	}
	if (kc == nil) != (vc == nil) {
		return tp.failf("SpanAttention", "kc %v, vc %v: give both caches or neither", kc, vc)
	}
	if kc == nil && cached > 0 {
		return tp.failf("SpanAttention", "cached = %d but no cache tensors", cached)
	}
	if kc != nil && (kc.ndim != 2 || !SameShape(kc, vc) || kc.shape[1] != kw || kc.shape[0] < cached) {
		return tp.failf("SpanAttention", "kc %v, vc %v: want both (P, %d) with P >= cached = %d", kc, vc, kw, cached)
	}
	if len(first) != N {
		return tp.failf("SpanAttention", "%d span starts for %d rows", len(first), N)
	}
	host := make([]float32, N)
	for r, f := range first {
		if !(r == 0 && f == 0) && !(r > 0 && (f == first[r-1] || int(f) == r)) {
			return tp.failf("SpanAttention", "first[%d] = %d: want %s", r, f, spanRule(r, first))
		}
		host[r] = float32(f)
	}
	kern, ok := kernel[SpanAttentionKernel](tp, KernelSpanAttention)
	if !ok {
		return tp.placeholder()
	}
	ft := tp.Input(host, N)
	o, ok := tp.alloc("span_attention", N, qw)
	if !ok {
		return o
	}
	if cached == 0 {
		kc, vc = nil, nil
	}
	kern(o, q, k, v, kc, vc, ft, cached, heads, kvHeads)
	return o
}

// spanRule says what first[r] may be.
func spanRule(r int, first []int32) string {
	if r == 0 {
		return "0 (row 0 starts the first span)"
	}
	return fmt.Sprintf("first[%d] = %d (continue its span) or %d (start one)", r-1, first[r-1], r)
}
