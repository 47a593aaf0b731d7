package cpu

import "math"

// headKeys is one worker's buffers for the real keys and values of a (batch, head) task, shared by
// attention's BLAS and register-block kernels: gathered copies when the real keys are not a prefix
// of the rows, and the gradients that accumulate there before they are scattered back.
type headKeys struct {
	kc, vc   []float32 // (Nk, dh) gathered real keys and values
	dkc, dvc []float32 // (Nk, dh) their gradients
	idx      []int32   // the real keys' rows, when not a prefix
}

// headTask is one (batch b, head j) task's view of q, k, v and their gradients: which keys are
// real, where K_j and V_j are read from, and where dK_j and dV_j accumulate.
type headTask struct {
	lay    keyLayout
	qo, ko int // offsets of Q_j, O_j, dO_j (row stride h) and of K_j, V_j in their tensors
	// kb, vb are K_j and V_j (nk, dh) with row stride ldk: the tensors' rows (ldk = h) or the
	// gathered copies (ldk = dh).
	kb, vb []float32
	ldk    int
	// dkb, dvb are where dK_j and dV_j (nk, dh) accumulate, with row stride ldk too: the
	// gradients' rows, or zeroed copies that scatter adds back (nil without the gradient).
	dkb, dvb []float32
}

// task returns the view of task (b, j) over q (B, Nq, h) and k, v (B, Nk, h) with dh-wide heads,
// gathering the real keys' rows of k, v into the buffers when they are not a prefix. dks and dvs
// (nil when not wanted) get gathered, zeroed accumulators in that case.
func (hk *headKeys) task(ms, ks, vs, dks, dvs []float32, b, j, Nq, Nk, h, dh int) headTask {
	var t headTask
	t.lay, hk.idx = realKeys(ms, b, Nk, hk.idx)
	t.qo, t.ko = b*Nq*h+j*dh, b*Nk*h+j*dh
	if t.lay.count == 0 { // no real keys (or none at all: k and v may be empty)
		return t
	}
	t.kb, t.vb, t.ldk = ks[t.ko:], vs[t.ko:], h
	if dks != nil {
		t.dkb = dks[t.ko:]
	}
	if dvs != nil {
		t.dvb = dvs[t.ko:]
	}
	if t.lay.prefix {
		return t
	}
	nk := t.lay.count
	gatherRows(hk.kc, t.kb, hk.idx, h, dh)
	gatherRows(hk.vc, t.vb, hk.idx, h, dh)
	t.kb, t.vb, t.ldk = hk.kc, hk.vc, dh
	if dks != nil {
		t.dkb = hk.dkc[:nk*dh]
		clear(t.dkb)
	}
	if dvs != nil {
		t.dvb = hk.dvc[:nk*dh]
		clear(t.dvb)
	}
	return t
}

// scatter adds the gathered accumulators of t back into the gradients' rows of the real keys
// (nothing to do when the real keys are a prefix: the products accumulated in place).
func (hk *headKeys) scatter(t headTask, dks, dvs []float32, h, dh int) {
	if t.lay.prefix {
		return
	}
	if dks != nil {
		scatterAddRows(dks[t.ko:], t.dkb, hk.idx, h, dh)
	}
	if dvs != nil {
		scatterAddRows(dvs[t.ko:], t.dvb, hk.idx, h, dh)
	}
}

// emptyHead writes the output of a task without real keys: zero rows O_j and a log-sum-exp of
// -Inf, so the backward gives it zero gradients.
func emptyHead(ob, lb []float32, Nq, h, dh int) {
	for i := range Nq {
		clear(ob[i*h : i*h+dh])
		lb[i] = float32(math.Inf(-1))
	}
}

// softmaxGradRows turns dP (Nq rows of nk scores, row stride ld) into dS = P * (dP -
// rowsum(dO * O)) * scale in place, row i's rowsum from O_j and dO_j (row stride h at offset qo).
func softmaxGradRows(dp, p []float32, ld, nk, Nq int, os, dos []float32, qo, h, dh int, scale float32) {
	for i := range Nq {
		var d float32
		orow, drow := os[qo+i*h:qo+i*h+dh], dos[qo+i*h:qo+i*h+dh]
		for c, ov := range orow {
			d += ov * drow[c]
		}
		softmaxGrad(dp[i*ld:i*ld+nk], p[i*ld:i*ld+nk], d, scale)
	}
}
