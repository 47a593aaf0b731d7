package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// spanProblem is one SpanAttention call's host data: q (N, heads*hd), k, v
// (N, kvHeads*hd), a cache kc, vc (P, kvHeads*hd) of which the first cached
// rows are seen (none when P is 0), and the span starts.
type spanProblem struct {
	N, P, cached, heads, kvHeads, hd int
	first                            []int32
	q, k, v, kc, vc                  []float32
}

func (p spanProblem) String() string {
	return fmt.Sprintf("N=%d P=%d cached=%d heads=%d kv=%d hd=%d first=%v", p.N, p.P, p.cached, p.heads, p.kvHeads, p.hd, p.first)
}

// newSpanProblem draws standard normal q, k, v and cache rows; cache rows
// from cached on are NaN, which no output may see.
func newSpanProblem(r *rand.Rand, N, P, cached, heads, kvHeads, hd int, first []int32) spanProblem {
	qw, kw := heads*hd, kvHeads*hd
	p := spanProblem{N: N, P: P, cached: cached, heads: heads, kvHeads: kvHeads, hd: hd, first: first,
		q: randHost(r, N*qw), k: randHost(r, N*kw), v: randHost(r, N*kw)}
	if P > 0 {
		p.kc, p.vc = randHost(r, P*kw), randHost(r, P*kw)
		for i := cached * kw; i < P*kw; i++ {
			p.kc[i], p.vc[i] = float32(math.NaN()), float32(math.NaN())
		}
	}
	return p
}

// spanBuffer is a NewBuffer holding data, rows of width w.
func spanBuffer(t *testing.T, be engine.Backend, name string, data []float32, w int) *engine.Tensor {
	t.Helper()
	b, err := engine.NewBuffer(be, name, len(data)/w, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CopyFrom(data); err != nil {
		t.Fatal(err)
	}
	return b
}

// run computes SpanAttention on be on a forward-only tape, the cache in
// buffers.
func (p spanProblem) run(t *testing.T, be engine.Backend) []float32 {
	t.Helper()
	qw, kw := p.heads*p.hd, p.kvHeads*p.hd
	var kc, vc *engine.Tensor
	if p.P > 0 {
		kc, vc = spanBuffer(t, be, "kc", p.kc, kw), spanBuffer(t, be, "vc", p.vc, kw)
	}
	tp := engine.NewTape(be)
	tp.SetForwardOnly(true)
	o := tp.SpanAttention(tp.Input(p.q, p.N, qw), tp.Input(p.k, p.N, kw), tp.Input(p.v, p.N, kw), kc, vc, p.cached, p.first, p.heads, p.kvHeads)
	if err := tp.Err(); err != nil {
		t.Fatalf("%v: %v", p, err)
	}
	return o.ToHost()
}

// spanKeys lists the keys row r sees, in the order the op sums them: cache
// rows, then new rows.
func (p spanProblem) spanKeys(r int) (cache []int, span []int) {
	for i := range p.cached {
		cache = append(cache, i)
	}
	for i := int(p.first[r]); i <= r; i++ {
		span = append(span, i)
	}
	return cache, span
}

// reference is SpanAttention in float64 with, per output element, a bound
// on the error of a float32 evaluation in any summation order, derived from
// the computation with u = 2^-24:
//   - a score s_i = scale (q . k_i), a dot product of hd terms, errs by
//     at most gamma_hd scale sum_c |q_c k_ic| + 2u |s_i| (scale's rounding
//     and the product) + u |s_i - max| (the max subtracted in float32): at
//     most E over the row's keys;
//   - perturbing every score by at most E perturbs each probability by a
//     factor within exp(+-2E), less than 2.5E for E this small; the
//     exponentials, the normaliser and the products add a few u (8u
//     covers them, a fast float32 exp included);
//   - o_c = sum_i p_i v_ic over L keys errs by gamma_L sum_i p_i |v_ic|
//     (twice, for a float32 normaliser summed over L terms too), and sum_i
//     p_i |v_ic| <= max_i |v_ic| since the p_i sum to 1.
//
// So |o - o_ref| <= (2 gamma_L + 2.5 E + 8u) max_i |v_ic|; two float32
// evaluations differ by at most twice that.
func (p spanProblem) reference() (o, bound []float64) {
	qw, kw, hd := p.heads*p.hd, p.kvHeads*p.hd, p.hd
	group := p.heads / p.kvHeads
	u := fptol.Float32
	scale := 1 / math.Sqrt(float64(hd))
	o, bound = make([]float64, p.N*qw), make([]float64, p.N*qw)
	for r := range p.N {
		cache, span := p.spanKeys(r)
		L := len(cache) + len(span)
		for j := range p.heads {
			g := j / group
			key := func(i int) (k, v []float32) {
				if i < len(cache) {
					row := cache[i] * kw
					return p.kc[row+g*hd : row+(g+1)*hd], p.vc[row+g*hd : row+(g+1)*hd]
				}
				row := span[i-len(cache)] * kw
				return p.k[row+g*hd : row+(g+1)*hd], p.v[row+g*hd : row+(g+1)*hd]
			}
			qr := p.q[r*qw+j*hd : r*qw+(j+1)*hd]
			s, dotErr := make([]float64, L), make([]float64, L)
			mx := math.Inf(-1)
			for i := range L {
				kr, _ := key(i)
				var dot, mag float64
				for c := range hd {
					dot += float64(qr[c]) * float64(kr[c])
					mag += math.Abs(float64(qr[c]) * float64(kr[c]))
				}
				s[i] = scale * dot
				dotErr[i] = fptol.Gamma(hd, u)*scale*mag + 2*u*math.Abs(s[i])
				mx = max(mx, s[i])
			}
			var z, E float64
			for i := range L {
				E = max(E, dotErr[i]+u*math.Abs(s[i]-mx))
				s[i] = math.Exp(s[i] - mx)
				z += s[i]
			}
			for c := range hd {
				var sum, vmax float64
				for i := range L {
					_, vr := key(i)
					sum += s[i] / z * float64(vr[c])
					vmax = max(vmax, math.Abs(float64(vr[c])))
				}
				o[r*qw+j*hd+c] = sum
				bound[r*qw+j*hd+c] = (2*fptol.Gamma(L, u) + 2.5*E + 8*u) * vmax
			}
		}
	}
	return o, bound
}

// spanModes are the three uses of the op (and packed spans after a cache)
// for N rows after a cache of P.
func spanModes(N, P int) map[string]struct {
	cached int
	first  []int32
} {
	packed := make([]int32, N) // spans of 3, 2, 2, ...
	for r := 1; r < N; r++ {
		packed[r] = packed[r-1]
		if r == 3 || (r > 3 && (r-3)%2 == 0) {
			packed[r] = int32(r)
		}
	}
	alts := make([]int32, N)
	for r := range alts {
		alts[r] = int32(r)
	}
	return map[string]struct {
		cached int
		first  []int32
	}{
		"packed":              {0, packed},
		"next":                {P, make([]int32, N)},
		"alternatives":        {P, alts},
		"packed after cache":  {P - 2, packed},
		"alternatives, empty": {0, alts},
	}
}

// TestSpanAttentionReference: every mode, on odd shapes (N 7, a cache of 5,
// 6 query heads on 2, 3 or 6 kv heads of width 8), against float64 within
// the derived bound of reference(); and the NaN cache rows past cached
// reach no output.
func TestSpanAttentionReference(t *testing.T) {
	const N, P, heads, hd = 7, 5, 6, 8
	for _, be := range testBackends(t) {
		for _, kvHeads := range []int{2, 3, 6} {
			for name, m := range spanModes(N, P) {
				r := rand.New(rand.NewPCG(uint64(kvHeads), uint64(m.cached)))
				p := newSpanProblem(r, N, P, m.cached, heads, kvHeads, hd, m.first)
				got := p.run(t, be)
				want, bound := p.reference()
				worst := 0.0
				for i := range got {
					d := math.Abs(float64(got[i]) - want[i])
					if !(d <= bound[i]) {
						t.Fatalf("%s %v: o[%d] = %g, want %g within %.3g", name, p, i, got[i], want[i], bound[i])
					}
					worst = max(worst, d/bound[i])
				}
				t.Logf("%s kv=%d: largest error %.3g of the bound", name, kvHeads, worst)
			}
		}
	}
}

// TestSpanAttentionMatchesCausalAttention: packed sequences without a cache
// give, sequence by sequence, CausalAttention's rows (B = 1), within twice
// reference()'s bound (two float32 evaluations: GEMMs and a float32
// normaliser there, dot products in order and a float64 one here).
func TestSpanAttentionMatchesCausalAttention(t *testing.T) {
	const N, heads, kvHeads, hd = 23, 4, 2, 16
	qw, kw := heads*hd, kvHeads*hd
	starts := []int{0, 9, 10, 16} // sequences of 9, 1, 6 and 7 rows
	first := make([]int32, N)
	for s, a := range starts {
		b := N
		if s+1 < len(starts) {
			b = starts[s+1]
		}
		for r := a; r < b; r++ {
			first[r] = int32(a)
		}
	}
	for _, be := range testBackends(t) {
		p := newSpanProblem(rand.New(rand.NewPCG(4, 9)), N, 0, 0, heads, kvHeads, hd, first)
		got := p.run(t, be)
		_, bound := p.reference()
		for s, a := range starts {
			b := N
			if s+1 < len(starts) {
				b = starts[s+1]
			}
			T := b - a
			tp := engine.NewTape(be)
			tp.SetForwardOnly(true)
			o := tp.CausalAttention(tp.Input(p.q[a*qw:b*qw], 1, T, qw), tp.Input(p.k[a*kw:b*kw], 1, T, kw), tp.Input(p.v[a*kw:b*kw], 1, T, kw), heads, kvHeads)
			if err := tp.Err(); err != nil {
				t.Fatal(err)
			}
			want := o.ToHost()
			for i, w := range want {
				e := a*qw + i
				if d := math.Abs(float64(got[e] - w)); !(d <= 2*bound[e]) {
					t.Fatalf("%s: sequence %d (rows %d..%d): o[%d] = %g, CausalAttention %g, differ by %.3g > %.3g",
						be.BLAS().Name()[:5], s, a, b-1, e, got[e], w, d, 2*bound[e])
				}
			}
		}
	}
}

// TestSpanAttentionCacheConsistency: the three uses agree with one another.
//   - N rows after a cache of P equal the last N rows of P+N rows without a
//     cache (ForwardNext against Forward) within twice reference()'s bound:
//     not bit for bit, as the GEMMs differ in shape ((N, P+N) scores against
//     (P+N, P+N)), which changes the BLAS kernel's order of some sums;
//   - bit for bit, where the GEMM calls are the same: each of N alternatives
//     after a cache equals that token alone after it, and each packed
//     sequence equals that sequence alone.
func TestSpanAttentionCacheConsistency(t *testing.T) {
	const P, N, heads, kvHeads, hd = 11, 6, 6, 3, 8
	qw, kw := heads*hd, kvHeads*hd
	r := rand.New(rand.NewPCG(7, 7))
	for _, be := range testBackends(t) {
		whole := newSpanProblem(r, P+N, 0, 0, heads, kvHeads, hd, make([]int32, P+N))
		all := whole.run(t, be)
		_, bound := whole.reference()
		next := spanProblem{N: N, P: P + 3, cached: P, heads: heads, kvHeads: kvHeads, hd: hd, first: make([]int32, N),
			q: whole.q[P*qw:], k: whole.k[P*kw:], v: whole.v[P*kw:],
			kc: append(slices.Clone(whole.k[:P*kw]), nanRows(3*kw)...), vc: append(slices.Clone(whole.v[:P*kw]), nanRows(3*kw)...)}
		got := next.run(t, be)
		for i, x := range got {
			e := P*qw + i
			if d := math.Abs(float64(x - all[e])); !(d <= 2*bound[e]) {
				t.Fatalf("%s: row %d after a cache of %d: o[%d] = %g, one pass %g: differ by %.3g > %.3g",
					be.BLAS().Name()[:5], i/qw, P, i%qw, x, all[e], d, 2*bound[e])
			}
		}

		alts := next
		alts.first = []int32{0, 1, 2, 3, 4, 5}
		got = alts.run(t, be)
		for a := range N {
			one := next
			one.N, one.first = 1, []int32{0}
			one.q, one.k, one.v = next.q[a*qw:(a+1)*qw], next.k[a*kw:(a+1)*kw], next.v[a*kw:(a+1)*kw]
			if !bitsEqual(got[a*qw:(a+1)*qw], one.run(t, be)) {
				t.Fatalf("%s: alternative %d differs from that token alone after the cache", be.BLAS().Name()[:5], a)
			}
		}

		packed := whole
		packed.first = make([]int32, P+N)
		for i := P; i < P+N; i++ {
			packed.first[i] = P
		}
		got = packed.run(t, be)
		firstSeq := spanProblem{N: P, heads: heads, kvHeads: kvHeads, hd: hd, first: make([]int32, P),
			q: whole.q[:P*qw], k: whole.k[:P*kw], v: whole.v[:P*kw]}
		second := spanProblem{N: N, heads: heads, kvHeads: kvHeads, hd: hd, first: make([]int32, N),
			q: whole.q[P*qw:], k: whole.k[P*kw:], v: whole.v[P*kw:]}
		if !bitsEqual(got[:P*qw], firstSeq.run(t, be)) || !bitsEqual(got[P*qw:], second.run(t, be)) {
			t.Fatalf("%s: packed sequences differ from each sequence alone", be.BLAS().Name()[:5])
		}
		if bitsEqual(got[P*qw:], all[P*qw:]) {
			t.Fatalf("%s: the second sequence's rows do not depend on the first's presence: the test checks nothing", be.BLAS().Name()[:5])
		}
	}
}

// TestSpanAttentionKnownAnswer: a row whose span is itself alone, with no
// cache, attends to one key with probability exactly 1: its output is its
// own value row (query head j: kv head j/group), bit for bit.
func TestSpanAttentionKnownAnswer(t *testing.T) {
	const N, heads, kvHeads, hd = 5, 6, 2, 8
	qw, kw := heads*hd, kvHeads*hd
	p := newSpanProblem(rand.New(rand.NewPCG(1, 1)), N, 0, 0, heads, kvHeads, hd, []int32{0, 1, 2, 3, 4})
	for _, be := range testBackends(t) {
		got := p.run(t, be)
		for r := range N {
			for j := range heads {
				g := j / (heads / kvHeads)
				if !bitsEqual(got[r*qw+j*hd:r*qw+(j+1)*hd], p.v[r*kw+g*hd:r*kw+(g+1)*hd]) {
					t.Fatalf("row %d head %d: %v, want v's row, kv head %d: %v", r, j, got[r*qw+j*hd:r*qw+(j+1)*hd], g, p.v[r*kw+g*hd:r*kw+(g+1)*hd])
				}
			}
		}
	}
}

// TestSpanAttentionWorkers: the output's bits do not depend on the worker
// count (1, 2, 3 workers, parallel at any size).
func TestSpanAttentionWorkers(t *testing.T) {
	const N, P, heads, kvHeads, hd = 37, 19, 6, 2, 16
	first := make([]int32, N)
	for r := 1; r < N; r++ {
		first[r] = first[r-1]
		if r%9 == 0 {
			first[r] = int32(r)
		}
	}
	p := newSpanProblem(rand.New(rand.NewPCG(3, 3)), N, P, P-4, heads, kvHeads, hd, first)
	var want []float32
	for _, workers := range []int{1, 2, 3} {
		be, err := cpu.New(cpu.Config{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		be.SetMinWork(1)
		got := p.run(t, be)
		be.Close()
		if want == nil {
			want = got
			continue
		}
		if !bitsEqual(got, want) {
			t.Fatalf("%d workers: output differs from 1 worker's", workers)
		}
	}
}

// TestSpanAttentionRefusals: every malformed call fails the tape with an
// error naming what is wrong.
func TestSpanAttentionRefusals(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	other, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const N, heads, kvHeads, hd = 4, 4, 2, 2
	qw, kw := heads*hd, kvHeads*hd
	buf := func(b engine.Backend, rows int) *engine.Tensor {
		x, err := engine.NewBuffer(b, "cache", rows, kw)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	zeros := []int32{0, 0, 0, 0}
	cases := []struct {
		name        string
		training    bool
		qRows, kw   int
		kc, vc      *engine.Tensor
		cached      int
		first       []int32
		heads, kvH  int
		wantInError string
	}{
		{name: "training tape", training: true, qRows: N, kw: kw, first: zeros, heads: heads, kvH: kvHeads, wantInError: "not forward-only"},
		{name: "first[0] = 1", qRows: N, kw: kw, first: []int32{1, 1, 1, 1}, heads: heads, kvH: kvHeads, wantInError: "first[0] = 1"},
		{name: "a span going back", qRows: N, kw: kw, first: []int32{0, 1, 0, 0}, heads: heads, kvH: kvHeads, wantInError: "first[2] = 0: want first[1] = 1"},
		{name: "a later row", qRows: N, kw: kw, first: []int32{0, 0, 3, 3}, heads: heads, kvH: kvHeads, wantInError: "first[2] = 3"},
		{name: "negative", qRows: N, kw: kw, first: []int32{0, -1, -1, -1}, heads: heads, kvH: kvHeads, wantInError: "first[1] = -1"},
		{name: "too few starts", qRows: N, kw: kw, first: []int32{0, 0}, heads: heads, kvH: kvHeads, wantInError: "2 span starts and 2 cache segments for 4 rows"},
		{name: "cache too short", qRows: N, kw: kw, kc: buf(be, 3), vc: buf(be, 3), cached: 4, first: zeros, heads: heads, kvH: kvHeads, wantInError: "cache segment from 0 of 4 rows: want one within the cache's 3 rows"},
		{name: "no cache", qRows: N, kw: kw, cached: 2, first: zeros, heads: heads, kvH: kvHeads, wantInError: "no cache tensors"},
		{name: "one cache", qRows: N, kw: kw, kc: buf(be, 3), first: zeros, heads: heads, kvH: kvHeads, wantInError: "both caches or neither"},
		{name: "negative cached", qRows: N, kw: kw, kc: buf(be, 3), vc: buf(be, 3), cached: -1, first: zeros, heads: heads, kvH: kvHeads, wantInError: "cache segment from 0 of -1 rows"},
		{name: "foreign cache", qRows: N, kw: kw, kc: buf(other, 3), vc: buf(other, 3), cached: 1, first: zeros, heads: heads, kvH: kvHeads, wantInError: "is on backend"},
		{name: "k rows", qRows: N, kw: kw + 1, first: zeros, heads: heads, kvH: kvHeads, wantInError: "want kv heads dividing heads"},
		{name: "heads", qRows: N, kw: kw, first: zeros, heads: heads, kvH: 3, wantInError: "3 kv heads"},
	}
	for _, c := range cases {
		tp := engine.NewTape(be)
		tp.SetForwardOnly(!c.training)
		q := tp.Input(make([]float32, c.qRows*qw), c.qRows, qw)
		k, v := tp.Input(make([]float32, N*c.kw), N, c.kw), tp.Input(make([]float32, N*c.kw), N, c.kw)
		o := tp.SpanAttention(q, k, v, c.kc, c.vc, c.cached, c.first, c.heads, c.kvH)
		err := tp.Err()
		if err == nil || !strings.Contains(err.Error(), c.wantInError) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantInError)
		}
		if o == nil || o.Size() != 1 {
			t.Errorf("%s: got %v, want the placeholder", c.name, o)
		}
	}

	// Segments: a span's rows share one, and each lies within the cache.
	for _, c := range []struct {
		name        string
		first       []int32
		segs        []engine.CacheSegment
		wantInError string
	}{
		{"a span of two segments", []int32{0, 0, 2, 3}, []engine.CacheSegment{{0, 1}, {1, 1}, {0, 0}, {0, 0}}, "row 1 continues row 0's span"},
		{"past the cache", []int32{0, 1, 2, 3}, []engine.CacheSegment{{0, 1}, {2, 2}, {0, 0}, {0, 0}}, "row 1: cache segment from 2 of 2 rows"},
		{"negative from", []int32{0, 1, 2, 3}, []engine.CacheSegment{{-1, 1}, {0, 0}, {0, 0}, {0, 0}}, "row 0: cache segment from -1"},
	} {
		tp := engine.NewTape(be)
		tp.SetForwardOnly(true)
		tp.SpanAttentionSegments(tp.Input(make([]float32, N*qw), N, qw), tp.Input(make([]float32, N*kw), N, kw), tp.Input(make([]float32, N*kw), N, kw),
			buf(be, 3), buf(be, 3), c.first, c.segs, heads, kvHeads)
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), c.wantInError) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantInError)
		}
	}

	// The well-formed call of the same shapes passes (so the cases above
	// failed for their own reason).
	tp := engine.NewTape(be)
	tp.SetForwardOnly(true)
	tp.SpanAttention(tp.Input(make([]float32, N*qw), N, qw), tp.Input(make([]float32, N*kw), N, kw), tp.Input(make([]float32, N*kw), N, kw),
		buf(be, 3), buf(be, 3), 3, []int32{0, 0, 2, 3}, heads, kvHeads)
	if err := tp.Err(); err != nil {
		t.Fatalf("well-formed call: %v", err)
	}
}

// nanRows is n NaN values.
func nanRows(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

// bitsEqual reports whether a and b hold the same float32 bits.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// Spans with cache segments of their own give what each gives alone by
// SpanAttention after a cache of its segment's rows, within the derived
// bound of reference() for that span alone: the alternatives of three
// prefixes (one of them empty) and a packed continuation, laid out one after
// another in one cache, in one call. Not bit for bit: the GEMMs have the
// same shapes but their operands sit at other offsets, and gonum's kernels
// round by alignment (OpenBLAS's gave the same bits here).
func TestSpanAttentionSegmentsEqualAlone(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rng := rand.New(rand.NewPCG(7, 3))
	const heads, kvHeads, hd = 6, 2, 8
	qw, kw := heads*hd, kvHeads*hd
	// Spans: (segment, rows): prefix A (cache 0..4) with 3 alternatives, the
	// empty prefix with 2, prefix B (cache 5..11) with 2 alternatives, and 3
	// rows continuing prefix A.
	type span struct {
		seg  engine.CacheSegment
		rows int
		alts bool
	}
	spans := []span{{engine.CacheSegment{From: 0, Len: 5}, 3, true}, {engine.CacheSegment{}, 2, true},
		{engine.CacheSegment{From: 5, Len: 7}, 2, true}, {engine.CacheSegment{From: 0, Len: 5}, 3, false}}
	const P = 12
	kc, vc := randHost(rng, P*kw), randHost(rng, P*kw)
	var first []int32
	var segs []engine.CacheSegment
	for _, sp := range spans {
		start := int32(len(first))
		for i := range sp.rows {
			f := start
			if sp.alts {
				f = start + int32(i)
			}
			first, segs = append(first, f), append(segs, sp.seg)
		}
	}
	N := len(first)
	q, k, v := randHost(rng, N*qw), randHost(rng, N*kw), randHost(rng, N*kw)
	tp := engine.NewTape(be)
	tp.SetForwardOnly(true)
	kt, vt := spanBuffer(t, be, "kc", kc, kw), spanBuffer(t, be, "vc", vc, kw)
	got := tp.SpanAttentionSegments(tp.Input(q, N, qw), tp.Input(k, N, kw), tp.Input(v, N, kw), kt, vt, first, segs, heads, kvHeads).ToHost()
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	row := 0
	for i, sp := range spans {
		n := sp.rows
		var alone spanProblem
		f := make([]int32, n)
		for r := range f {
			if sp.alts {
				f[r] = int32(r)
			}
		}
		alone = spanProblem{N: n, P: sp.seg.Len, cached: sp.seg.Len, heads: heads, kvHeads: kvHeads, hd: hd, first: f,
			q: q[row*qw : (row+n)*qw], k: k[row*kw : (row+n)*kw], v: v[row*kw : (row+n)*kw]}
		if sp.seg.Len > 0 {
			alone.kc, alone.vc = kc[sp.seg.From*kw:(sp.seg.From+sp.seg.Len)*kw], vc[sp.seg.From*kw:(sp.seg.From+sp.seg.Len)*kw]
		}
		want, bound := alone.reference()
		for e, x := range got[row*qw : (row+n)*qw] {
			if d := math.Abs(float64(x) - want[e]); !(d <= bound[e]) {
				t.Errorf("span %d (%+v), value %d: %g, the span alone %g (bound %.3g)", i, sp, e, x, want[e], bound[e])
				break
			}
		}
		row += n
	}
}
