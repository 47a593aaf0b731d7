package cuda

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// attnDims are the sizes of one attention call.
type attnDims struct {
	B, Nq, Nk, h, heads, dh, BH int
	scale                       float32
}

// attnShape returns the sizes; the head-split kernels index in 32 bits.
func (b *Backend) attnShape(q, k *engine.Tensor, heads int) attnDims {
	d := attnDims{B: q.Dim(0), Nq: q.Dim(1), Nk: k.Dim(1), h: q.Dim(2), heads: heads}
	d.dh = d.h / heads
	d.BH = d.B * heads
	d.scale = float32(1 / math.Sqrt(float64(d.dh)))
	if int64(d.B)*int64(max(d.Nq, d.Nk))*int64(max(d.h, d.Nk)) >= 1<<31 {
		b.fail(fmt.Errorf("attention of %d sets of %d x %d rows, width %d: too large for 32-bit indexing", d.B, d.Nq, d.Nk, d.h))
	}
	return d
}

// flashMaxHead is the widest head flash.cu handles (FB_D), flashRows the
// rows of one block, a thread each (FB_T).
const (
	flashMaxHead = 32
	flashRows    = 64
)

var flashBlock = Dim3{X: flashRows}

// fused reports whether attention of these sizes runs in flash.cu.
func (b *Backend) fused(d attnDims) bool {
	return b.flash && d.dh <= flashMaxHead && d.heads <= 65535 && d.B <= 65535
}

// flashGrid is flash.cu's grid over n rows.
func flashGrid(n int, d attnDims) Dim3 {
	return Dim3{X: uint32((n + flashRows - 1) / flashRows), Y: uint32(d.heads), Z: uint32(d.B)}
}

// split copies x (B, N, h) to (B, heads, N, dh) in slot, zeroing padded rows
// when mask is given.
func (b *Backend) split(slot int, x *engine.Tensor, mask DevicePtr, d attnDims, N int) DevicePtr {
	n := d.B * N * d.h
	p := b.scratchPtr(slot, n)
	b.launch("ga_split_heads", gridFor(n), blk, p, ptr(x), mask, int32(d.B), int32(N), int32(d.heads), int32(d.dh))
	return p
}

// merge writes or adds (B, heads, N, dh) at src into y (B, N, h).
func (b *Backend) merge(y *engine.Tensor, src DevicePtr, d attnDims, N int, accumulate bool) {
	n := d.B * N * d.h
	b.launch("ga_merge_heads", gridFor(n), blk, ptr(y), src, int32(d.B), int32(N), int32(d.heads), int32(d.dh), b2i(accumulate))
}

// scores splits q, k, v into heads (padded key rows zeroed) and computes the
// scaled scores S = scale Qh Kh^T: (B*heads, Nq, Nk), in slotS.
func (b *Backend) scores(q, k, v *engine.Tensor, mask DevicePtr, d attnDims) (qh, kh, vh, s DevicePtr) {
	qh = b.split(slotQ, q, 0, d, d.Nq)
	kh = b.split(slotK, k, mask, d, d.Nk)
	vh = b.split(slotV, v, mask, d, d.Nk)
	s = b.scratchPtr(slotS, d.BH*d.Nq*d.Nk)
	if b.Err() == nil {
		b.gemm(false, true, d.BH, d.Nq, d.Nk, d.dh, d.scale, qh, kh, 0, s)
	}
	return qh, kh, vh, s
}

// attention is masked multi-head attention: the products are strided-batched
// GEMMs over batch*heads, the softmax a kernel (attention.cu).
func (b *Backend) attention(o, lse, q, k, v, mask *engine.Tensor, heads int) {
	d := b.attnShape(q, k, heads)
	if d.B == 0 || d.Nq == 0 || !b.begin() {
		return
	}
	defer b.end()
	mp := ptr(mask)
	if b.fused(d) {
		b.flops += 4 * int64(d.BH) * int64(d.Nq) * int64(d.Nk) * int64(d.dh) // as the two products of the unfused path
		b.launch("ga_flash_fwd", flashGrid(d.Nq, d), flashBlock, ptr(o), ptr(lse), ptr(q), ptr(k), ptr(v), mp,
			int32(d.Nq), int32(d.Nk), int32(heads), int32(d.dh), d.scale)
		return
	}
	_, _, vh, s := b.scores(q, k, v, mp, d)
	oh := b.scratchPtr(slotO, d.BH*d.Nq*d.dh)
	if b.Err() != nil {
		return
	}
	rows := d.BH * d.Nq
	b.launch("ga_attn_softmax", warpRows(rows), blk, s, ptr(lse), mp, int32(heads), int32(d.Nq), int32(d.Nk), int32(rows))
	b.gemm(false, false, d.BH, d.Nq, d.dh, d.Nk, 1, s, vh, 0, oh)
	b.merge(o, oh, d, d.Nq, false)
}

// attentionBackward recomputes P from q, k and lse and accumulates dq, dk,
// dv (any may be nil).
func (b *Backend) attentionBackward(dq, dk, dv, do, q, k, v, mask, o, lse *engine.Tensor, heads int) {
	d := b.attnShape(q, k, heads)
	if d.B == 0 || d.Nq == 0 || (dq == nil && dk == nil && dv == nil) || !b.begin() {
		return
	}
	defer b.end()
	mp := ptr(mask)
	if b.fused(d) {
		// FLOPs as the unfused path's five products: S, dV, dP, dQ, dK.
		b.flops += 10 * int64(d.BH) * int64(d.Nq) * int64(d.Nk) * int64(d.dh)
		if dq != nil {
			b.launch("ga_flash_bwd_dq", flashGrid(d.Nq, d), flashBlock, ptr(dq), ptr(q), ptr(k), ptr(v), mp, ptr(do), ptr(o), ptr(lse),
				int32(d.Nq), int32(d.Nk), int32(heads), int32(d.dh), d.scale)
		}
		if dk != nil || dv != nil {
			b.launch("ga_flash_bwd_dkv", flashGrid(d.Nk, d), flashBlock, ptr(dk), ptr(dv), ptr(q), ptr(k), ptr(v), mp, ptr(do), ptr(o), ptr(lse),
				int32(d.Nq), int32(d.Nk), int32(heads), int32(d.dh), d.scale)
		}
		return
	}
	qh, kh, vh, p := b.scores(q, k, v, mp, d)
	doh := b.split(slotO, do, 0, d, d.Nq)
	if b.Err() != nil {
		return
	}
	rows := d.BH * d.Nq
	b.launch("ga_attn_recompute_p", warpRows(rows), blk, p, ptr(lse), mp, int32(heads), int32(d.Nq), int32(d.Nk), int32(rows))
	if dv != nil { // dVh = P^T dOh: (Nk, dh) per head
		dvh := b.scratchPtr(slotDV, d.BH*d.Nk*d.dh)
		b.gemm(true, false, d.BH, d.Nk, d.dh, d.Nq, 1, p, doh, 0, dvh)
		b.merge(dv, dvh, d, d.Nk, true)
	}
	if dq == nil && dk == nil {
		return
	}
	dp := b.scratchPtr(slotDP, d.BH*d.Nq*d.Nk)
	b.gemm(false, true, d.BH, d.Nq, d.Nk, d.dh, 1, doh, vh, 0, dp) // dP = dOh Vh^T
	b.launch("ga_attn_softmax_bwd", warpRows(rows), blk, dp, p, ptr(do), ptr(o),
		int32(heads), int32(d.Nq), int32(d.Nk), int32(d.dh), d.scale, int32(rows))
	if dq != nil { // dQh = dS Kh
		dqh := b.scratchPtr(slotDQ, d.BH*d.Nq*d.dh)
		b.gemm(false, false, d.BH, d.Nq, d.dh, d.Nk, 1, dp, kh, 0, dqh)
		b.merge(dq, dqh, d, d.Nq, true)
	}
	if dk != nil { // dKh = dS^T Qh
		dkh := b.scratchPtr(slotDK, d.BH*d.Nk*d.dh)
		b.gemm(true, false, d.BH, d.Nk, d.dh, d.Nq, 1, dp, qh, 0, dkh)
		b.merge(dk, dkh, d, d.Nk, true)
	}
}
