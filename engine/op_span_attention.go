package engine

import "fmt"

// KernelSpanAttention names SpanAttention's fused kernel, a
// SpanAttentionKernel.
const KernelSpanAttention = "span_attention"

// SpanAttentionKernel is SpanAttention's fused kernel (forward only): o: (N,
// heads*hd) from q: (N, heads*hd), k, v: (N, kvHeads*hd), the cache kc, vc:
// (P, kvHeads*hd) (nil when no row sees a cache row) and spans: (N, 3), row
// r's [first, from, cached] as float32s (exact below 2^24). Query row r, head
// j attends to cache rows from..from+cached-1 and then to new rows first..r
// of kv head j/(heads/kvHeads), in that order; from and cached are the same
// for every row of a span.
type SpanAttentionKernel func(o, q, k, v, kc, vc, spans *Tensor, heads, kvHeads int)

// maxSpanRows bounds N and the cache rows: span starts and cache segments
// travel as float32, exact below 2^24.
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
	segs := make([]CacheSegment, len(first))
	for r := range segs {
		segs[r] = CacheSegment{Len: cached}
	}
	return tp.spanAttention("SpanAttention", q, k, v, kc, vc, first, segs, heads, kvHeads)
}

// CacheSegment is the rows From..From+Len-1 of a KV cache that a span of SpanAttentionSegments
// sees before its own rows.
type CacheSegment struct{ From, Len int }

// SpanAttentionSegments is SpanAttention where each span sees a segment of the cache of its own:
// row r sees cache rows segs[r].From..segs[r].From+segs[r].Len-1, then new rows first[r]..r, and
// segs[r] is the same for every row of a span. One call so runs the alternatives of several
// prefixes whose caches lie one after another in kc and vc (each a span of one row, after its
// prefix's segment), so that each weight matrix of the pass is read once for all of them. A span
// gives what SpanAttention gives it alone after a cache of its segment's rows, to rounding (on the
// CPU the GEMMs have the same shapes; whether the bits agree depends on the BLAS: gonum rounds by
// the operands' alignment).
func (tp *Tape) SpanAttentionSegments(q, k, v, kc, vc *Tensor, first []int32, segs []CacheSegment, heads, kvHeads int) *Tensor {
	return tp.spanAttention("SpanAttentionSegments", q, k, v, kc, vc, first, segs, heads, kvHeads)
}

// spanAttention checks and runs the two ops, named op in errors.
func (tp *Tape) spanAttention(op string, q, k, v, kc, vc *Tensor, first []int32, segs []CacheSegment, heads, kvHeads int) *Tensor {
	if !tp.usable(op, q, k, v, kc, vc) {
		return tp.placeholder()
	}
	if !tp.forwardOnly {
		return tp.failf(op, "the tape is not forward-only: %s has no backward (call SetForwardOnly(true) on an inference tape)", op)
	}
	if q.ndim != 2 || k.ndim != 2 || !SameShape(k, v) || q.shape[0] != k.shape[0] || q.shape[0] < 1 {
		return tp.failf(op, "q %v, k %v, v %v: want q (N, heads*hd), k and v (N, kvHeads*hd), N >= 1", q, k, v)
	}
	N, qw, kw := q.shape[0], q.shape[1], k.shape[1]
	if heads < 1 || kvHeads < 1 || heads%kvHeads != 0 || qw%heads != 0 || kw%kvHeads != 0 || qw/heads != kw/kvHeads || qw == 0 {
		return tp.failf(op, "q width %d, k width %d, %d heads, %d kv heads: want kv heads dividing heads and one head width", qw, kw, heads, kvHeads)
	}
	if N >= maxSpanRows {
		return tp.failf(op, "%d rows: want fewer than %d", N, maxSpanRows)
	}
	if (kc == nil) != (vc == nil) {
		return tp.failf(op, "kc %v, vc %v: give both caches or neither", kc, vc)
	}
	if len(first) != N || len(segs) != N {
		return tp.failf(op, "%d span starts and %d cache segments for %d rows", len(first), len(segs), N)
	}
	P := 0
	if kc != nil {
		if kc.ndim != 2 || !SameShape(kc, vc) || kc.shape[1] != kw || kc.shape[0] >= maxSpanRows {
			return tp.failf(op, "kc %v, vc %v: want both (P, %d), P < %d", kc, vc, kw, maxSpanRows)
		}
		P = kc.shape[0]
	}
	host := make([]float32, 3*N) // (N, 3): first, from, cached
	seen := false                // some row sees a cache row
	for r, f := range first {
		if !(r == 0 && f == 0) && !(r > 0 && (f == first[r-1] || int(f) == r)) {
			return tp.failf(op, "first[%d] = %d: want %s", r, f, spanRule(r, first))
		}
		sg := segs[r]
		switch {
		case sg.Len > 0 && kc == nil:
			return tp.failf(op, "row %d sees %d cache rows but no cache tensors were given", r, sg.Len)
		case sg.From < 0 || sg.Len < 0 || sg.Len > 0 && sg.From+sg.Len > P:
			return tp.failf(op, "row %d: cache segment from %d of %d rows: want one within the cache's %d rows", r, sg.From, sg.Len, P)
		case int(f) != r && sg != segs[r-1]:
			return tp.failf(op, "row %d continues row %d's span but sees cache segment %+v, not %+v", r, r-1, sg, segs[r-1])
		}
		seen = seen || sg.Len > 0
		host[3*r], host[3*r+1], host[3*r+2] = float32(f), float32(sg.From), float32(sg.Len)
	}
	kern, ok := kernel[SpanAttentionKernel](tp, KernelSpanAttention)
	if !ok {
		return tp.placeholder()
	}
	st := tp.Input(host, N, 3)
	o, ok := tp.alloc("span_attention", N, qw)
	if !ok {
		return o
	}
	if !seen {
		kc, vc = nil, nil
	}
	kern(o, q, k, v, kc, vc, st, heads, kvHeads)
	return o
}

// spanRule says what first[r] may be.
func spanRule(r int, first []int32) string {
	if r == 0 {
		return "0 (row 0 starts the first span)"
	}
	return fmt.Sprintf("first[%d] = %d (continue its span) or %d (start one)", r-1, first[r-1], r)
}
