package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// causalAttention computes causal grouped-query attention one (sequence,
// kv head) pair per task, looping over the query heads that share the kv
// head (so that in backward one task owns dK and dV of its kv head and no
// two workers add into the same rows). Per query head: S = scale Q_j K_g^T
// by GEMM (the full (T, T) square: the upper triangle is computed and then
// discarded, which costs a factor 2 in this GEMM but keeps it one call),
// row t's softmax over keys 0..t in place and the rest zeroed, then
// O_j = P V_g by GEMM. The zeroed weights make no output row depend on a
// later position's finite inputs, bit for bit.
func (c *Backend) causalAttention(o, lse, q, k, v *engine.Tensor, heads, kvHeads int) {
	B, T, qw, kw := q.Dim(0), q.Dim(1), q.Dim(2), k.Dim(2)
	hd, group := qw/heads, heads/kvHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	qs, ks, vs, os, ls := f32(q), f32(k), f32(v), f32(o), f32(lse)
	c.parallelRows(B*kvHeads, group*T*T*hd, func(w, lo, hi int) {
		s := c.scratchFor(w, T*T) // (T, T) scores, then probabilities
		for task := lo; task < hi; task++ {
			b, g := task/kvHeads, task%kvHeads
			ko := b*T*kw + g*hd // K_g, V_g: (T, hd), row stride kw
			for j := g * group; j < (g+1)*group; j++ {
				qo := b*T*qw + j*hd                       // Q_j, O_j: (T, hd), row stride qw
				lb := ls[(b*heads+j)*T : (b*heads+j+1)*T] // (T)
				c.sgemm(false, true, T, T, hd, scale, qs[qo:], qw, ks[ko:], kw, 0, s, T)
				for i := range T {
					lb[i] = softmaxRow(s[i*T : i*T+i+1])
					clear(s[i*T+i+1 : (i+1)*T])
				}
				c.sgemm(false, false, T, hd, T, 1, s, T, vs[ko:], kw, 0, os[qo:], qw)
			}
		}
	})
}

// causalAttentionBackward recomputes P = exp(scale Q K^T - lse) on and
// below the diagonal (zero above) per (sequence, query head) and
// accumulates dV_g += P^T dO_j, dS = P * (dO_j V_g^T - rowsum(dO_j * O_j))
// * scale, dQ_j += dS K_g, dK_g += dS^T Q_j, by GEMM; the query heads of
// one kv head run in one task, in order, so dK_g and dV_g sum them
// deterministically.
func (c *Backend) causalAttentionBackward(dq, dk, dv, do, q, k, v, o, lse *engine.Tensor, heads, kvHeads int) {
	B, T, qw, kw := q.Dim(0), q.Dim(1), q.Dim(2), k.Dim(2)
	hd, group := qw/heads, heads/kvHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	qs, ks, vs, os, ls := f32(q), f32(k), f32(v), f32(o), f32(lse)
	dos, dqs, dks, dvs := f32(do), f32(dq), f32(dk), f32(dv)
	c.parallelRows(B*kvHeads, 4*group*T*T*hd, func(w, lo, hi int) {
		buf := c.scratchFor(w, 2*T*T)
		p, dp := buf[:T*T], buf[T*T:] // (T, T) probabilities and their gradient
		for task := lo; task < hi; task++ {
			b, g := task/kvHeads, task%kvHeads
			ko := b*T*kw + g*hd
			for j := g * group; j < (g+1)*group; j++ {
				qo := b*T*qw + j*hd
				lb := ls[(b*heads+j)*T : (b*heads+j+1)*T]
				c.sgemm(false, true, T, T, hd, scale, qs[qo:], qw, ks[ko:], kw, 0, p, T)
				for i := range T {
					row := p[i*T : i*T+i+1]
					expAffine(row, row, 1, -lb[i])
					clear(p[i*T+i+1 : (i+1)*T])
				}
				if dvs != nil { // dV_g (T, hd) += P^T dO_j
					c.sgemm(true, false, T, hd, T, 1, p, T, dos[qo:], qw, 1, dvs[ko:], kw)
				}
				if dqs == nil && dks == nil {
					continue
				}
				// dP = dO_j V_g^T: (T, T).
				c.sgemm(false, true, T, T, hd, 1, dos[qo:], qw, vs[ko:], kw, 0, dp, T)
				for i := range T {
					var d float32
					orow, drow := os[qo+i*qw:qo+i*qw+hd], dos[qo+i*qw:qo+i*qw+hd]
					for cix, ov := range orow {
						d += ov * drow[cix]
					}
					prow, dprow := p[i*T:i*T+i+1], dp[i*T:i*T+i+1]
					for jj, pv := range prow {
						dprow[jj] = pv * (dprow[jj] - d) * scale
					}
					clear(dp[i*T+i+1 : (i+1)*T])
				}
				if dqs != nil { // dQ_j (T, hd) += dS K_g
					c.sgemm(false, false, T, hd, T, 1, dp, T, ks[ko:], kw, 1, dqs[qo:], qw)
				}
				if dks != nil { // dK_g (T, hd) += dS^T Q_j
					c.sgemm(true, false, T, hd, T, 1, dp, T, qs[qo:], qw, 1, dks[ko:], kw)
				}
			}
		}
	})
}
