package cuda

// The cross-check case of SpanAttention (kernels/lm.cu's ga_span_attention
// against the CPU's kernel): the op's three uses and packed spans after a
// cache, on odd shapes, head widths up to the kernel's 256, keys more than
// the kernel's eight warps, NaN cache rows past the seen ones; and the op
// through a forward-only tape with its cache in NewBuffer buffers filled by
// CopyRows. The kernel is fp32 on CUDA cores in every GEMM precision, so the
// tolerance is the elementwise one.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine"
)

// spanCase is one SpanAttention problem: N new rows after a cache of P rows
// of which cached are seen, span starts by mode; mode segments is
// alternatives each after a cache segment of its own (SpanAttentionSegments:
// several prefixes' alternatives in one call), of cached or cached-1 rows at
// offsets spread over the P rows.
type spanCase struct {
	N, P, cached, heads, kvHeads, hd int
	mode                             string // packed, next or alternatives
}

// first is the case's span starts: next: 0 for every row; alternatives and
// segments: r; packed: spans of 3, then 2, 2, ...
func (c spanCase) first() []int32 {
	f := make([]int32, c.N)
	for r := 1; r < c.N; r++ {
		switch c.mode {
		case "alternatives", "segments":
			f[r] = int32(r)
		case "packed":
			f[r] = f[r-1]
			if r == 3 || (r > 3 && (r-3)%2 == 0) {
				f[r] = int32(r)
			}
		}
	}
	return f
}

// spans is the kernel's (N, 3) input: each row's span start, cache segment
// start and length.
func (c spanCase) spans() []float32 {
	var out []float32
	for r, f := range c.first() {
		from, n := 0, c.cached
		if c.mode == "segments" {
			n = max(c.cached-r%2, 0)
			from = (3 * r) % (c.P - n + 1)
		}
		out = append(out, float32(f), float32(from), float32(n))
	}
	return out
}

var spanCases = []spanCase{
	{7, 5, 5, 6, 2, 8, "next"},
	{7, 5, 5, 6, 3, 8, "alternatives"},
	{7, 0, 0, 6, 6, 8, "packed"},
	{7, 5, 3, 6, 2, 8, "packed"}, // packed spans after a cache, two NaN rows unseen
	{1, 300, 300, 4, 4, 128, "next"},
	{1, 1, 0, 2, 1, 4, "next"}, // one key: probability 1
	{33, 0, 0, 12, 4, 64, "packed"},
	{9, 40, 37, 8, 1, 256, "alternatives"},
	{5, 17, 17, 3, 3, 100, "next"}, // a head width that is no multiple of 32
	{70, 0, 0, 2, 2, 1, "next"},    // head width 1, one span of 70
	{6, 23, 9, 6, 2, 40, "segments"},
}

// spanHost is one spanCase's host inputs.
type spanHost struct {
	q, k, v, kc, vc []float32 // kc, vc: rows from cached on are NaN, which no output may see
	spans           []float32 // (N, 3): the span starts and cache segments as the kernel reads them
}

// spanInputs draws c's inputs: standard normal q, k, v and seen cache rows.
func spanInputs(rng *rand.Rand, c spanCase) spanHost {
	qw, kw := c.heads*c.hd, c.kvHeads*c.hd
	normals := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	in := spanHost{q: normals(c.N * qw), k: normals(c.N * kw), v: normals(c.N * kw), kc: normals(c.P * kw), vc: normals(c.P * kw)}
	if c.mode != "segments" { // segments spread over the whole cache
		for i := c.cached * kw; i < c.P*kw; i++ {
			in.kc[i], in.vc[i] = float32(math.NaN()), float32(math.NaN())
		}
	}
	in.spans = c.spans()
	return in
}

func caseSpanAttention(h *harness) {
	for _, c := range spanCases {
		qw, kw := c.heads*c.hd, c.kvHeads*c.hd
		in := spanInputs(h.rng, c)
		desc := fmt.Sprintf("%s N=%d P=%d cached=%d heads=%d kvHeads=%d hd=%d", c.mode, c.N, c.P, c.cached, c.heads, c.kvHeads, c.hd)
		h.sub("SpanAttention %s", desc)
		q, k, v := h.make(in.q, c.N, qw), h.make(in.k, c.N, kw), h.make(in.v, c.N, kw)
		var kc, vc *pair
		if c.cached > 0 { // as the op passes them: nil when no cache row is seen
			kc, vc = h.make(in.kc, c.P, kw), h.make(in.vc, c.P, kw)
		}
		st, o := h.make(in.spans, c.N, 3), h.garbage(c.N, qw)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			fused[engine.SpanAttentionKernel](be, engine.KernelSpanAttention)(T(o), T(q), T(k), T(v), T(kc), T(vc), T(st), c.heads, c.kvHeads)
		})
		h.allFinite("device o", o.dut.ToHost(), nil)
		h.out("o", o, h.tol.Elem)
	}

	// Through the tape: the cache in buffers, appended to by CopyRows, then
	// the next rows and alternatives after it.
	const P, N, heads, kvHeads, hd = 12, 5, 4, 2, 32
	qw, kw := heads*hd, kvHeads*hd
	h.sub("SpanAttention tape P=%d N=%d heads=%d kvHeads=%d hd=%d", P, N, heads, kvHeads, hd)
	host := map[string][]float32{"kp": h.normals(P*kw, 1), "vp": h.normals(P*kw, 1), "q": h.normals(N*qw, 1), "k": h.normals(N*kw, 1), "v": h.normals(N*kw, 1)}
	run := func(be engine.Backend, first []int32) []float32 {
		kc, err := engine.NewBuffer(be, "kc", P+N, kw)
		if err != nil {
			h.errorf("NewBuffer on %s: %v", be.Name(), err)
			return nil
		}
		vc, err := engine.NewBuffer(be, "vc", P+N, kw)
		if err != nil {
			h.errorf("NewBuffer on %s: %v", be.Name(), err)
			return nil
		}
		tp := engine.NewTape(be)
		tp.SetForwardOnly(true)
		for _, c := range []struct {
			dst  *engine.Tensor
			data []float32
		}{{kc, host["kp"]}, {vc, host["vp"]}} {
			if err := engine.CopyRows(c.dst, 0, tp.Input(c.data, P, kw), 0, P); err != nil {
				h.errorf("CopyRows on %s: %v", be.Name(), err)
			}
		}
		tp.Reset() // the cache outlives the step that filled it
		o := tp.SpanAttention(tp.Input(host["q"], N, qw), tp.Input(host["k"], N, kw), tp.Input(host["v"], N, kw), kc, vc, P, first, heads, kvHeads)
		if err := tp.Err(); err != nil {
			h.errorf("SpanAttention on %s: %v", be.Name(), err)
			return nil
		}
		return o.ToHost()
	}
	for _, first := range [][]int32{{0, 0, 0, 0, 0}, {0, 1, 2, 3, 4}} {
		ref, dut := run(h.ref, first), run(h.dut, first)
		if ref == nil || dut == nil {
			continue
		}
		if used, msg := compareValues(dut, ref, nil, h.tol.Elem); msg != "" {
			h.errorf("first %v: o: %s", first, msg)
		} else if used > h.worst {
			h.worst, h.worstWhere = used, fmt.Sprintf("%s: first %v, rtol %g", h.what, first, h.tol.Elem)
		}
	}
}

// spanDeterminism adds SpanAttention's output to a determinism run
// (checkDeterminism): packed spans after a cache, keys spread over every
// warp. Nothing when be lacks the kernel.
func spanDeterminism(be engine.Backend, tp *engine.Tape, normals func(int) []float32, out map[string][]float32) {
	kern, ok := be.Kernel(engine.KernelSpanAttention).(engine.SpanAttentionKernel)
	if !ok {
		return
	}
	c := spanCase{N: 40, P: 200, cached: 190, heads: 8, kvHeads: 2, hd: 64, mode: "packed"}
	qw, kw := c.heads*c.hd, c.kvHeads*c.hd
	o := tp.Input(make([]float32, c.N*qw), c.N, qw)
	kern(o, tp.Input(normals(c.N*qw), c.N, qw), tp.Input(normals(c.N*kw), c.N, kw), tp.Input(normals(c.N*kw), c.N, kw),
		tp.Input(normals(c.P*kw), c.P, kw), tp.Input(normals(c.P*kw), c.P, kw), tp.Input(c.spans(), c.N, 3), c.heads, c.kvHeads)
	out["SpanAttention"] = o.ToHost()
}
