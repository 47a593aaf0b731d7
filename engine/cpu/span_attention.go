package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// spanAttention is SpanAttention's kernel (engine.SpanAttentionKernel). The
// rows fall in spans (a row r with first[r] = r starts one); one piece is a
// (span, kv head) pair, which gathers the keys and values its rows see (its
// cache segment's rows from..from+cached-1, then the span's rows) once for
// the query heads of that kv head. Per query head it makes models/llama's
// host attention's calls, so that the two differ by the BLAS kernel's
// rounding at most (not checked here: engine's tests cannot import
// models/llama): S = scale Q K^T by one GEMM over the span's t rows and all
// L = cached + t keys, the host's max-subtracted softmax on row i's first
// cached+i+1 scores (exponentials and their sum in float64) with the rest
// zeroed, O = P V by one GEMM. Pieces and GEMM shapes depend on the span's
// own shape only and each piece runs whole on one worker, so the bits do not
// depend on the worker count, nor on the other spans of the call. Cache rows
// outside a span's segment and other spans' rows are never read; a span's
// later rows enter with weight exactly 0 (so finite values there change
// nothing, as in CausalAttention).
//
// o, q: (N, heads*hd); k, v: (N, kvHeads*hd); kc, vc: (P, kvHeads*hd) or nil
// when no span sees a cache row; spans: (N, 3), [first, from, cached].
func (c *Backend) spanAttention(o, q, k, v, kc, vc, spans *engine.Tensor, heads, kvHeads int) {
	N, qw, kw := q.Dim(0), q.Dim(1), k.Dim(1)
	hd, group := qw/heads, heads/kvHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	qs, ks, vs, os, sp := f32(q), f32(k), f32(v), f32(o), f32(spans)
	kcs, vcs := f32(kc), f32(vc)
	starts := []int{}  // span starts, then N
	longest, L := 0, 0 // the longest span; the most keys a piece has
	for r := range N {
		if int(sp[3*r]) == r {
			starts = append(starts, r)
		}
		t := r - int(sp[3*r]) + 1
		longest, L = max(longest, t), max(L, int(sp[3*r+2])+t)
	}
	starts = append(starts, N)
	need := longest * L // scores (t, L)
	if kc != nil {
		need += 2 * L * hd // gathered keys and values (L, hd)
	}
	c.parallelRows((len(starts)-1)*kvHeads, 2*group*longest*L*hd, func(w, lo, hi int) {
		buf := c.scratchFor(w, need)
		for piece := lo; piece < hi; piece++ {
			s, g := piece/kvHeads, piece%kvHeads
			a, t := starts[s], starts[s+1]-starts[s]
			from, cached := int(sp[3*a+1]), int(sp[3*a+2])
			n := cached + t
			sc := buf[:t*n] // (t, n) scores, then probabilities
			// keys, vals: (n, hd) with row stride ld: the span's rows of k and v
			// as they are, or after a cache segment, its rows and the span's
			// gathered.
			keys, vals, ld := ks[a*kw+g*hd:], vs[a*kw+g*hd:], kw
			if cached > 0 {
				keys, vals, ld = buf[longest*L:longest*L+n*hd], buf[longest*L+L*hd:longest*L+L*hd+n*hd], hd
				for i := range n {
					src, vsrc, at := kcs, vcs, (from+i)*kw+g*hd
					if i >= cached {
						src, vsrc, at = ks, vs, (a+i-cached)*kw+g*hd
					}
					copy(keys[i*hd:(i+1)*hd], src[at:at+hd])
					copy(vals[i*hd:(i+1)*hd], vsrc[at:at+hd])
				}
			}
			for j := g * group; j < (g+1)*group; j++ {
				qo := a*qw + j*hd // Q_j, O_j: (t, hd), row stride qw
				c.sgemm(false, true, t, n, hd, scale, qs[qo:], qw, keys, ld, 0, sc, n)
				for i := range t {
					row := sc[i*n : (i+1)*n]
					softmaxF64Sum(row[:cached+i+1])
					clear(row[cached+i+1:])
				}
				c.sgemm(false, false, t, hd, n, 1, sc, n, vals, ld, 0, os[qo:], qw)
			}
		}
	})
}

// softmaxF64Sum replaces x by softmax(x) as models/llama's host softmax does:
// the maximum subtracted in float32, each exponential and their sum in
// float64, the probabilities the float32 exponentials times float32(1/sum).
// A NaN or +Inf score, or only -Inf scores, make every probability NaN.
func softmaxF64Sum(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for j, v := range x {
		e := math.Exp(float64(v - mx))
		x[j] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for j := range x {
		x[j] *= inv
	}
}
