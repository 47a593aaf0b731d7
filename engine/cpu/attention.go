package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// keyLayout describes which keys of one batch element take part: count real
// keys, and when they are not a prefix, their indices (then K and V rows are
// gathered into contiguous scratch so that padded rows, whatever they hold,
// never enter a product).
type keyLayout struct {
	count  int
	prefix bool
}

// realKeys returns batch element b's key layout and appends the indices of
// real keys to idx when they are not a prefix.
func realKeys(mask []float32, b, nk int, idx []int32) (keyLayout, []int32) {
	if mask == nil {
		return keyLayout{count: nk, prefix: true}, idx
	}
	m := mask[b*nk : (b+1)*nk]
	l := keyLayout{prefix: true}
	for j, v := range m {
		if v > 0.5 {
			l.count++
			if l.count != j+1 {
				l.prefix = false
			}
		}
	}
	if !l.prefix {
		idx = idx[:0]
		for j, v := range m {
			if v > 0.5 {
				idx = append(idx, int32(j))
			}
		}
	}
	return l, idx
}

// gatherRows copies rows idx of a head's (N, dh) block with row stride ld
// into dst as a contiguous (len(idx), dh) matrix.
func gatherRows(dst, src []float32, idx []int32, ld, dh int) {
	for r, i := range idx {
		copy(dst[r*dh:(r+1)*dh], src[int(i)*ld:int(i)*ld+dh])
	}
}

// scatterAddRows adds the rows of a contiguous (len(idx), dh) matrix into
// rows idx of dst (row stride ld).
func scatterAddRows(dst, src []float32, idx []int32, ld, dh int) {
	for r, i := range idx {
		d := dst[int(i)*ld : int(i)*ld+dh]
		for c, v := range src[r*dh : (r+1)*dh] {
			d[c] += v
		}
	}
}

// attnScratch is one worker's scratch for one (batch, head) task.
type attnScratch struct {
	s, dp []float32 // (Nq, Nk) scores/probabilities and their gradient
	headKeys
}

func (c *Backend) attnScratchFor(w, Nq, Nk, dh int) *attnScratch {
	buf := c.scratchFor(w, 2*Nq*Nk+4*Nk*dh)
	a := &attnScratch{}
	a.s, buf = buf[:Nq*Nk], buf[Nq*Nk:]
	a.dp, buf = buf[:Nq*Nk], buf[Nq*Nk:]
	a.kc, buf = buf[:Nk*dh], buf[Nk*dh:]
	a.vc, buf = buf[:Nk*dh], buf[Nk*dh:]
	a.dkc, buf = buf[:Nk*dh], buf[Nk*dh:]
	a.dvc = buf[:Nk*dh]
	a.idx = make([]int32, 0, Nk)
	return a
}

// attention computes masked multi-head attention one (batch, head) pair per
// task: S = scale Q_j K_j^T by GEMM into the worker's scratch, an in-place
// softmax, then O_j = P V_j by GEMM. Only real keys enter the products
// (a prefix of the rows, or gathered into scratch), so padded rows never
// influence the result, not even through NaN or Inf.
func (c *Backend) attention(o, lse, q, k, v, mask *engine.Tensor, heads int) {
	if q.Dim(1) == 0 {
		return // no queries: o and lse are empty (the kernels would slice past the empty q)
	}
	if c.useTiledAttention(q.Dim(2) / heads) {
		c.attentionTiled(o, lse, q, k, v, mask, heads)
		return
	}
	c.attentionBLAS(o, lse, q, k, v, mask, heads)
}

// attentionBLAS is attention with the per-head products on BLAS.
func (c *Backend) attentionBLAS(o, lse, q, k, v, mask *engine.Tensor, heads int) {
	B, Nq, Nk, h := q.Dim(0), q.Dim(1), k.Dim(1), q.Dim(2)
	dh := h / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	qs, ks, vs, os, ls, ms := f32(q), f32(k), f32(v), f32(o), f32(lse), f32(mask)
	c.parallelRows(B*heads, Nq*Nk*dh, func(w, lo, hi int) {
		a := c.attnScratchFor(w, Nq, Nk, dh)
		for t := lo; t < hi; t++ {
			b, j := t/heads, t%heads
			ht := a.task(ms, ks, vs, nil, nil, b, j, Nq, Nk, h, dh)
			qb, ob := qs[ht.qo:], os[ht.qo:]            // Q_j, O_j: (Nq, dh), row stride h
			lb := ls[(b*heads+j)*Nq : (b*heads+j+1)*Nq] // (Nq)
			nk := ht.lay.count
			if nk == 0 {
				emptyHead(ob, lb, Nq, h, dh)
				continue
			}
			s := a.s[:Nq*nk]
			c.sgemm(false, true, Nq, nk, dh, scale, qb, h, ht.kb, ht.ldk, 0, s, nk)
			for i := range Nq {
				lb[i] = softmaxRow(s[i*nk : (i+1)*nk])
			}
			c.sgemm(false, false, Nq, dh, nk, 1, s, nk, ht.vb, ht.ldk, 0, ob, h)
		}
	})
}

// softmaxRow replaces the scores x by their softmax in place and returns
// their log-sum-exp.
func softmaxRow(x []float32) float32 {
	mx := maxOf(x)
	sum := expAffine(x, x, 1, -mx)
	scaleSlice(x, 1/sum)
	return mx + float32(math.Log(float64(sum)))
}

// attentionBackward recomputes P = exp(scale Q K^T - lse) per (batch, head)
// and accumulates dV += P^T dO, dS = P * (dO V^T - rowsum(dO * O)) * scale,
// dQ += dS K, dK += dS^T Q, all by GEMM over the real keys only: padded
// keys and values get exactly zero gradient.
func (c *Backend) attentionBackward(dq, dk, dv, do, q, k, v, mask, o, lse *engine.Tensor, heads int) {
	if q.Dim(1) == 0 {
		return // no queries: nothing reaches dk or dv
	}
	if c.useTiledAttention(q.Dim(2) / heads) {
		c.attentionBackwardTiled(dq, dk, dv, do, q, k, v, mask, o, lse, heads)
		return
	}
	c.attentionBackwardBLAS(dq, dk, dv, do, q, k, v, mask, o, lse, heads)
}

// attentionBackwardBLAS is attentionBackward with the per-head products on BLAS.
func (c *Backend) attentionBackwardBLAS(dq, dk, dv, do, q, k, v, mask, o, lse *engine.Tensor, heads int) {
	B, Nq, Nk, h := q.Dim(0), q.Dim(1), k.Dim(1), q.Dim(2)
	dh := h / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	qs, ks, vs, os, ls, ms := f32(q), f32(k), f32(v), f32(o), f32(lse), f32(mask)
	dos, dqs, dks, dvs := f32(do), f32(dq), f32(dk), f32(dv)
	c.parallelRows(B*heads, 4*Nq*Nk*dh, func(w, lo, hi int) {
		a := c.attnScratchFor(w, Nq, Nk, dh)
		for t := lo; t < hi; t++ {
			b, j := t/heads, t%heads
			ht := a.task(ms, ks, vs, dks, dvs, b, j, Nq, Nk, h, dh)
			nk := ht.lay.count
			if nk == 0 {
				continue // zero output, zero gradients
			}
			qo, kb, vb, ldk := ht.qo, ht.kb, ht.vb, ht.ldk
			lb := ls[(b*heads+j)*Nq : (b*heads+j+1)*Nq]
			p, dp := a.s[:Nq*nk], a.dp[:Nq*nk]
			// P: (Nq, nk), recomputed from the saved log-sum-exp.
			c.sgemm(false, true, Nq, nk, dh, scale, qs[qo:], h, kb, ldk, 0, p, nk)
			for i := range Nq {
				row := p[i*nk : (i+1)*nk]
				expAffine(row, row, 1, -lb[i])
			}
			if dvs != nil { // dV_j (nk, dh) += P^T dO_j
				c.sgemm(true, false, nk, dh, Nq, 1, p, nk, dos[qo:], h, 1, ht.dvb, ldk)
			}
			if dqs != nil || dks != nil {
				// dP = dO_j V_j^T: (Nq, nk), then dS in place.
				c.sgemm(false, true, Nq, nk, dh, 1, dos[qo:], h, vb, ldk, 0, dp, nk)
				softmaxGradRows(dp, p, nk, nk, Nq, os, dos, qo, h, dh, scale)
				if dqs != nil { // dQ_j (Nq, dh) += dS K_j
					c.sgemm(false, false, Nq, dh, nk, 1, dp, nk, kb, ldk, 1, dqs[qo:], h)
				}
				if dks != nil { // dK_j (nk, dh) += dS^T Q_j
					c.sgemm(true, false, nk, dh, Nq, 1, dp, nk, qs[qo:], h, 1, ht.dkb, ldk)
				}
			}
			a.scatter(ht, dks, dvs, h, dh)
		}
	})
}
