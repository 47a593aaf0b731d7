package cuda

import "github.com/gelo-research/geloattack/engine"

// Unary: y = f(x, c).
func (b *Backend) Unary(op engine.UnaryOp, y, x *engine.Tensor, c float32) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(y)
	b.launch("ga_unary", gridFor(n), blk, int32(op), ptr(y), ptr(x), c, int64(n))
}

// UnaryBackward accumulates dx.
func (b *Backend) UnaryBackward(op engine.UnaryOp, dx, dy, x, y *engine.Tensor, c float32) {
	n := dy.Size()
	if n == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(dx)
	b.launch("ga_unary_bwd", gridFor(n), blk, int32(op), ptr(dx), ptr(dy), ptr(x), ptr(y), c, int64(n))
}

// Binary: y = a op b; b has a's shape or one element.
func (b *Backend) Binary(op engine.BinaryOp, y, a, bt *engine.Tensor) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(y)
	b.launch("ga_binary", gridFor(n), blk, int32(op), ptr(y), ptr(a), ptr(bt), b2i(bt.Size() == 1 && n != 1), int64(n))
}

// BinaryBackward accumulates da and db (summed for a one-element b).
func (b *Backend) BinaryBackward(op engine.BinaryOp, da, db, dy, a, bt *engine.Tensor) {
	n := dy.Size()
	if n == 0 || (da == nil && db == nil) || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(da, db)
	scalar := bt.Size() == 1 && n != 1
	dbFull := db
	if scalar {
		dbFull = nil
	}
	if da != nil || dbFull != nil {
		b.launch("ga_binary_bwd", gridFor(n), blk, int32(op), ptr(da), ptr(dbFull), ptr(dy), ptr(a), ptr(bt), b2i(scalar), int64(n))
	}
	if scalar && db != nil {
		part := b.scratchPtr(slotPartial, 2*reduceParts)
		b.launch("ga_binary_bwd_b_partial", Dim3{X: reduceParts}, blk, int32(op), part, ptr(dy), ptr(a), ptr(bt), int64(n))
		b.launch("ga_finish_sum", Dim3{X: 1}, blk, ptr(db), DevicePtr(0), part, int32(reduceParts), 1.0, int32(1))
	}
}

// AdamW updates p from g (zeroing g) and the moments m, v.
func (b *Backend) AdamW(p, g, m, v *engine.Tensor, s engine.AdamWStep) {
	n := p.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	if b.adamWWithCopy(p, g, m, v, s) {
		return
	}
	b.wrote(p)
	b.launch("ga_adamw", gridFor(n), blk, ptr(p), ptr(g), ptr(m), ptr(v), int64(n),
		s.LR, s.Beta1, s.Beta2, s.Eps, s.Decay, s.BiasCorr1, s.BiasCorr2)
}
