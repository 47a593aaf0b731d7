package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// spanAttention is SpanAttention's kernel (engine.SpanAttentionKernel): one
// piece per (query row, head), each computed whole by one worker in a fixed
// order, so the output's bits do not depend on the worker count or on how
// the pieces are cut. A piece follows models/llama's host attention step
// for step, to agree with it to a few ulps: scores scale * (q . k) with the
// dot product summed over the head's columns in order (the host's SGEMM
// with alpha = scale), the host's max-subtracted softmax (exponentials and
// their sum in float64, probabilities in float32), then o = sum_i p_i v_i in
// float32, keys in order: cache rows 0..cached-1, then new rows
// first[r]..r. The host's GEMM also adds the zero weights of the keys a
// query does not see; here they are skipped, so a non-finite value in an
// unseen row reaches no output.
//
// o, q: (N, heads*hd); k, v: (N, kvHeads*hd); kc, vc: (P, kvHeads*hd) or nil
// when cached is 0; first: (N).
func (c *Backend) spanAttention(o, q, k, v, kc, vc, first *engine.Tensor, cached, heads, kvHeads int) {
	N, qw, kw := q.Dim(0), q.Dim(1), k.Dim(1)
	hd, group := qw/heads, heads/kvHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	qs, ks, vs, os, fs := f32(q), f32(k), f32(v), f32(o), f32(first)
	kcs, vcs := f32(kc), f32(vc)
	span := 0 // the longest span a row sees
	for r := range N {
		span = max(span, r-int(fs[r])+1)
	}
	c.parallelRows(N*heads, 2*(cached+span)*hd, func(w, lo, hi int) {
		sc := c.scratchFor(w, cached+span)
		for piece := lo; piece < hi; piece++ {
			r, j := piece/heads, piece%heads
			g, f0 := j/group, int(fs[r])
			s := sc[:cached+r-f0+1] // (cached + span of r) scores, then probabilities
			qr := qs[r*qw+j*hd : r*qw+(j+1)*hd]
			spanScores(s[:cached], qr, kcs, kw, g*hd, scale)
			spanScores(s[cached:], qr, ks[f0*kw:], kw, g*hd, scale)
			softmaxF64Sum(s)
			out := os[r*qw+j*hd : r*qw+(j+1)*hd]
			clear(out)
			spanValues(out, s[:cached], vcs, kw, g*hd)
			spanValues(out, s[cached:], vs[f0*kw:], kw, g*hd)
		}
	})
}

// spanScores sets s[i] = scale * (q . key i), key i being keys[off+i*ld :
// off+i*ld+len(q)]. Four keys at a time, so that four sums are in flight;
// each sum still runs over the columns in order, so a score's bits do not
// depend on which keys share its group.
func spanScores(s, q, keys []float32, ld, off int, scale float32) {
	hd := len(q)
	i := 0
	for ; i+4 <= len(s); i += 4 {
		k0 := keys[off+i*ld : off+i*ld+hd]
		k1 := keys[off+(i+1)*ld : off+(i+1)*ld+hd]
		k2 := keys[off+(i+2)*ld : off+(i+2)*ld+hd]
		k3 := keys[off+(i+3)*ld : off+(i+3)*ld+hd]
		var a0, a1, a2, a3 float32
		for c, x := range q {
			a0 += x * k0[c]
			a1 += x * k1[c]
			a2 += x * k2[c]
			a3 += x * k3[c]
		}
		s[i], s[i+1], s[i+2], s[i+3] = scale*a0, scale*a1, scale*a2, scale*a3
	}
	for ; i < len(s); i++ {
		kr := keys[off+i*ld : off+i*ld+hd]
		var a float32
		for c, x := range q {
			a += x * kr[c]
		}
		s[i] = scale * a
	}
}

// spanValues adds sum_i p[i] * value i into out, value i being
// vals[off+i*ld : off+i*ld+len(out)], in the order of i.
func spanValues(out, p, vals []float32, ld, off int) {
	for i, w := range p {
		vr := vals[off+i*ld : off+i*ld+len(out)]
		for c, x := range vr {
			out[c] += w * x
		}
	}
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
