package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// useTiledAttention says whether attention's per-head products run on tileGemm (AVX2 and FMA,
// a head width that is whole blocks of tileCols, and no SetBLASAttention) instead of BLAS.
// tileGemm sums each element in the order of OpenBLAS's SkylakeX kernel (its bits on the paper's
// shapes, where k fits one of its blocks; other kernels sum some products in another order, so
// their results move in the last bits),
// without their packing of both operands and zeroing of the scores, which cost small products
// like these as much as a third of their time.
func (c *Backend) useTiledAttention(dh int) bool {
	return hasAVX2 && dh%tileCols == 0 && !c.blasAttn.Load()
}

// SetBLASAttention makes attention run its per-head products on BLAS (true) or, where it
// applies, on the register-block kernels (false, the default), from the next call on: for
// benchmarks that compare the two in one process (results differ in the last bits).
func (c *Backend) SetBLASAttention(on bool) { c.blasAttn.Store(on) }

// tiledScratch is one worker's scratch for one (batch, head) task of the tiled kernels; ld is
// the row stride of the score matrices, the keys rounded up to whole row blocks and then to
// whole column blocks, so that the transposed products may read a partial block's extra rows.
type tiledScratch struct {
	s, dp    []float32 // (roundUp(Nq, tileRows), ld) scores/probabilities and their gradient
	kt, vt   []float32 // (dh, ld) K_j^T and V_j^T, zero beyond the real keys
	qp, dop  []float32 // (roundUp(Nq, tileRows), dh) Q_j and dO_j, zero beyond Nq
	tmp      []float32 // (tileRows, max(ld, dh)) a partial row block
	headKeys           // (Nk, dh) gathered real keys and values (and, packed, a prefix's), their gradients
}

// scoreStride is the row stride ld of the score matrices for nk real keys.
func scoreStride(nk int) int { return roundUp(roundUp(nk, tileRows), tileCols) }

func (c *Backend) tiledScratchFor(w, Nq, Nk, dh int) *tiledScratch {
	nq, ld := roundUp(Nq, tileRows), scoreStride(Nk)
	sizes := []int{nq * ld, nq * ld, dh * ld, dh * ld, nq * dh, nq * dh, Nk * dh, Nk * dh, Nk * dh, Nk * dh, tileRows * max(ld, dh)}
	total := 0
	for _, n := range sizes {
		total += n
	}
	buf := c.scratchFor(w, total)
	parts := make([][]float32, len(sizes))
	for i, n := range sizes {
		parts[i], buf = buf[:n:n], buf[n:]
	}
	return &tiledScratch{s: parts[0], dp: parts[1], kt: parts[2], vt: parts[3], qp: parts[4], dop: parts[5], tmp: parts[10],
		headKeys: headKeys{kc: parts[6], vc: parts[7], dkc: parts[8], dvc: parts[9], idx: make([]int32, 0, Nk)}}
}

// packTransposed writes the (n, dh) matrix src (row stride lds) transposed into dst as
// (dh, ld), columns n..ld-1 zero.
func packTransposed(dst, src []float32, n, lds, dh, ld int) {
	for d := range dh {
		row := dst[d*ld : (d+1)*ld]
		for r := range n {
			row[r] = src[r*lds+d]
		}
		clear(row[n:])
	}
}

// packRows copies the (n, dh) matrix src (row stride lds) into dst as contiguous rows and
// zeroes dst's rows after them.
func packRows(dst, src []float32, n, lds, dh int) {
	for r := range n {
		copy(dst[r*dh:(r+1)*dh], src[r*lds:r*lds+dh])
	}
	clear(dst[n*dh:])
}

// attentionTiled is attention with the per-head products on tileGemm (see useTiledAttention):
// S = scale Q_j K_j^T over whole row blocks of the padded Q_j, an in-place softmax of each
// real row over the real keys, O_j = P V_j.
func (c *Backend) attentionTiled(o, lse, q, k, v, mask *engine.Tensor, heads int) {
	B, Nq, Nk, h := q.Dim(0), q.Dim(1), k.Dim(1), q.Dim(2)
	dh := h / heads
	nq := roundUp(Nq, tileRows)
	scale := float32(1 / math.Sqrt(float64(dh)))
	qs, ks, vs, os, ls, ms := f32(q), f32(k), f32(v), f32(o), f32(lse), f32(mask)
	c.parallelRows(B*heads, Nq*Nk*dh, func(w, lo, hi int) {
		a := c.tiledScratchFor(w, Nq, Nk, dh)
		for t := lo; t < hi; t++ {
			b, j := t/heads, t%heads
			ht := a.task(ms, ks, vs, nil, nil, b, j, Nq, Nk, h, dh)
			ob := os[ht.qo:]                            // O_j: (Nq, dh), row stride h
			lb := ls[(b*heads+j)*Nq : (b*heads+j+1)*Nq] // (Nq)
			nk := ht.lay.count
			if nk == 0 {
				emptyHead(ob, lb, Nq, h, dh)
				continue
			}
			kb, vb, ldk := ht.kb, ht.vb, ht.ldk // K_j, V_j: (nk, dh)
			ld := scoreStride(nk)
			packTransposed(a.kt, kb, nk, ldk, dh, ld)
			packRows(a.qp, qs[ht.qo:], Nq, h, dh)
			if ht.lay.prefix { // V_j contiguous, so that the product's rows of V stay in L1
				packRows(a.vc[:nk*dh], vb, nk, h, dh)
				vb = a.vc
			}
			s := a.s[:nq*ld]
			c.flops.Add(2 * int64(Nq) * int64(nk) * int64(dh))
			tileGemm(nq, ld, dh, scale, a.qp, dh, 1, a.kt, ld, false, s, ld, a.tmp)
			for i := range Nq {
				lb[i] = softmaxRow(s[i*ld : i*ld+nk])
			}
			c.flops.Add(2 * int64(Nq) * int64(nk) * int64(dh))
			tileGemm(Nq, dh, nk, 1, s, ld, 1, vb, dh, false, ob, h, a.tmp)
		}
	})
}

// attentionBackwardTiled is attentionBackward with the per-head products on tileGemm: P
// recomputed from the saved log-sum-exp, dV += P^T dO, dS = P * (dO V^T - rowsum(dO * O)) *
// scale, dQ += dS K, dK += dS^T Q, the transposed products reading P and dS by columns.
func (c *Backend) attentionBackwardTiled(dq, dk, dv, do, q, k, v, mask, o, lse *engine.Tensor, heads int) {
	B, Nq, Nk, h := q.Dim(0), q.Dim(1), k.Dim(1), q.Dim(2)
	dh := h / heads
	nq := roundUp(Nq, tileRows)
	scale := float32(1 / math.Sqrt(float64(dh)))
	qs, ks, vs, os, ls, ms := f32(q), f32(k), f32(v), f32(o), f32(lse), f32(mask)
	dos, dqs, dks, dvs := f32(do), f32(dq), f32(dk), f32(dv)
	c.parallelRows(B*heads, 4*Nq*Nk*dh, func(w, lo, hi int) {
		a := c.tiledScratchFor(w, Nq, Nk, dh)
		for t := lo; t < hi; t++ {
			b, j := t/heads, t%heads
			ht := a.task(ms, ks, vs, dks, dvs, b, j, Nq, Nk, h, dh)
			nk := ht.lay.count
			if nk == 0 {
				continue // zero output, zero gradients
			}
			qo := ht.qo
			lb := ls[(b*heads+j)*Nq : (b*heads+j+1)*Nq]
			dkb, dvb, dkvLd := ht.dkb, ht.dvb, ht.ldk // where dK_j, dV_j accumulate: (nk, dh)
			// K_j and V_j contiguous (a prefix's packed, gathered ones already), so that the
			// products' rows of K and V stay in L1.
			if ht.lay.prefix {
				packRows(a.kc[:nk*dh], ht.kb, nk, h, dh)
				packRows(a.vc[:nk*dh], ht.vb, nk, h, dh)
			}
			kb, vb, ldk := a.kc, a.vc, dh
			ld := scoreStride(nk)
			flops := 2 * int64(Nq) * int64(nk) * int64(dh)
			p, dp := a.s[:nq*ld], a.dp[:nq*ld]
			// P: (Nq, nk), recomputed from the saved log-sum-exp.
			packTransposed(a.kt, kb, nk, ldk, dh, ld)
			packRows(a.qp, qs[qo:], Nq, h, dh)
			c.flops.Add(flops)
			tileGemm(nq, ld, dh, scale, a.qp, dh, 1, a.kt, ld, false, p, ld, a.tmp)
			for i := range Nq {
				row := p[i*ld : i*ld+nk]
				expAffine(row, row, 1, -lb[i])
			}
			packRows(a.dop, dos[qo:], Nq, h, dh)
			if dvs != nil { // dV_j (nk, dh) += P^T dO_j
				c.flops.Add(flops)
				tileGemm(nk, dh, Nq, 1, p, 1, ld, a.dop, dh, true, dvb, dkvLd, a.tmp)
			}
			if dqs != nil || dks != nil {
				// dP = dO_j V_j^T: (Nq, nk).
				packTransposed(a.vt, vb, nk, ldk, dh, ld)
				c.flops.Add(flops)
				tileGemm(nq, ld, dh, 1, a.dop, dh, 1, a.vt, ld, false, dp, ld, a.tmp)
				softmaxGradRows(dp, p, ld, nk, Nq, os, dos, qo, h, dh, scale)
				if dqs != nil { // dQ_j (Nq, dh) += dS K_j
					c.flops.Add(flops)
					tileGemm(Nq, dh, nk, 1, dp, ld, 1, kb, ldk, true, dqs[qo:], h, a.tmp)
				}
				if dks != nil { // dK_j (nk, dh) += dS^T Q_j
					c.flops.Add(flops)
					tileGemm(nk, dh, Nq, 1, dp, 1, ld, a.qp, dh, true, dkb, dkvLd, a.tmp)
				}
			}
			a.scatter(ht, dks, dvs, h, dh)
		}
	})
}
