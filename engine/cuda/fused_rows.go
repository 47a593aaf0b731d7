package cuda

import "github.com/gelo-research/geloattack/engine"

// rmsNorm: y = x rstd w with rstd = 1/sqrt(mean x^2 + eps) per row.
func (b *Backend) rmsNorm(y, rstd, x, w *engine.Tensor, eps float32) {
	M, h := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_rmsnorm", Dim3{X: uint32(M)}, rowBlock(h), ptr(y), ptr(rstd), ptr(x), ptr(w), int32(h), eps)
}

// rmsRowsPer is the rows per chunk of RMSNormBackward's dw partial sums.
const rmsRowsPer = 64

// rmsNormBackward accumulates dx and dw.
func (b *Backend) rmsNormBackward(dx, dw, dy, x, w, rstd *engine.Tensor) {
	M, h := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	if dx != nil {
		b.launch("ga_rmsnorm_bwd_dx", Dim3{X: uint32(M)}, rowBlock(h), ptr(dx), ptr(dy), ptr(x), ptr(w), ptr(rstd), int32(h))
	}
	if dw != nil {
		chunks := (M + rmsRowsPer - 1) / rmsRowsPer
		part := b.scratchPtr(slotRows, chunks*h)
		gx := uint32((h + gaBlock - 1) / gaBlock)
		b.launch("ga_rmsnorm_bwd_dw_partial", Dim3{X: gx, Y: uint32(chunks)}, blk, part, ptr(dy), ptr(x), ptr(rstd),
			int32(M), int32(h), int32(rmsRowsPer))
		b.launch("ga_finish_cols", Dim3{X: gx}, blk, ptr(dw), part, int32(chunks), int32(h))
	}
}

// swiGLU: y = silu(gate) up.
func (b *Backend) swiGLU(y, gate, up *engine.Tensor) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_swiglu", gridFor(n), blk, ptr(y), ptr(gate), ptr(up), int64(n))
}

// swiGLUBackward writes or accumulates dgate and dup.
func (b *Backend) swiGLUBackward(dgate, dup, dy, gate, up *engine.Tensor, accGate, accUp bool) {
	n := dy.Size()
	if n == 0 || (dgate == nil && dup == nil) || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_swiglu_bwd", gridFor(n), blk, ptr(dgate), ptr(dup), ptr(dy), ptr(gate), ptr(up), b2i(accGate), b2i(accUp), int64(n))
}

// scaleRows: y[r, :] (+)= x[r, :] s[r].
func (b *Backend) scaleRows(y, x, s *engine.Tensor, accumulate bool) {
	rows, h := s.Size(), x.Cols()
	if rows == 0 || h == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_scale_rows", gridFor(rows*h), blk, ptr(y), ptr(x), ptr(s), int32(h), int64(rows), b2i(accumulate))
}

// meanPool: y (B, h) = mean of the real rows of x (B, N, h).
func (b *Backend) meanPool(y, x, mask *engine.Tensor) {
	B, N, h := x.Dim(0), x.Dim(1), x.Dim(2)
	if B == 0 || h == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_mean_pool", Dim3{X: uint32((h + gaBlock - 1) / gaBlock), Y: uint32(B)}, blk, ptr(y), ptr(x), ptr(mask), int32(N), int32(h))
}

// meanPoolBackward accumulates dx (B, N, h) from dy (B, h).
func (b *Backend) meanPoolBackward(dx, dy, mask *engine.Tensor) {
	if dx == nil {
		return
	}
	B, N, h := dx.Dim(0), dx.Dim(1), dx.Dim(2)
	if B == 0 || N == 0 || h == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_mean_pool_bwd", Dim3{X: uint32(B)}, blk, ptr(dx), ptr(dy), ptr(mask), int32(N), int32(h))
}

// l2Normalize: y = x / max(||x||, eps) per row, norm = ||x||.
func (b *Backend) l2Normalize(y, norm, x *engine.Tensor, eps float32) {
	M, e := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_l2norm", Dim3{X: uint32(M)}, rowBlock(e), ptr(y), ptr(norm), ptr(x), int32(e), eps)
}

// l2NormalizeBackward accumulates dx.
func (b *Backend) l2NormalizeBackward(dx, dy, y, norm *engine.Tensor, eps float32) {
	M, e := y.Rows(), y.Cols()
	if M == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_l2norm_bwd", Dim3{X: uint32(M)}, rowBlock(e), ptr(dx), ptr(dy), ptr(y), ptr(norm), int32(e), eps)
}

// rowReduce: y (M) = log-sum-exp or norm of each row of x (M, C).
func (b *Backend) rowReduce(op engine.RowOp, y, x *engine.Tensor) {
	M, C := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	name := "ga_row_lse"
	if op == engine.RowNorm {
		name = "ga_row_norm"
	}
	b.launch(name, Dim3{X: uint32(M)}, rowBlock(C), ptr(y), ptr(x), int32(C))
}

// rowReduceBackward accumulates dx.
func (b *Backend) rowReduceBackward(op engine.RowOp, dx, dy, x, y *engine.Tensor) {
	M, C := x.Rows(), x.Cols()
	if M == 0 || C == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_row_reduce_bwd", gridFor(M*C), blk, int32(op), ptr(dx), ptr(dy), ptr(x), ptr(y), int32(C), int64(M))
}

// infoNCE: y = mean over rows of LSE(scores) - LSE(scores on positives).
func (b *Backend) infoNCE(y, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	if B == 0 || !b.begin() {
		return
	}
	defer b.end()
	rl := b.scratchPtr(slotRows, B)
	b.launch("ga_infonce_rows", Dim3{X: uint32(B)}, rowBlock(C), rl, ptr(scores), ptr(pos), int32(C))
	b.reduceTo(ptr(y), 0, rl, B, false, 1/float64(B), false)
}

// infoNCEBackward accumulates dscores from the scalar dy.
func (b *Backend) infoNCEBackward(ds, dy, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	if B == 0 || ds == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_infonce_bwd", Dim3{X: uint32(B)}, rowBlock(C), ptr(ds), ptr(dy), ptr(scores), ptr(pos), int32(B), int32(C))
}

// broadcastAdd: y = x + col (per row) + row (per column, per batch element).
func (b *Backend) broadcastAdd(y, x, col, row *engine.Tensor) {
	M, C := x.Dim(-2), x.Dim(-1)
	rows := x.Rows()
	if rows == 0 || C == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_broadcast_add", gridFor(rows*C), blk, ptr(y), ptr(x), ptr(col), ptr(row), int32(M), int32(C), int64(rows))
}

// broadcastAddBackward accumulates dx, dcol (row sums) and drow (column sums).
func (b *Backend) broadcastAddBackward(dx, dcol, drow, dy *engine.Tensor) {
	M, C := dy.Dim(-2), dy.Dim(-1)
	rows := dy.Rows()
	if rows == 0 || C == 0 || !b.begin() {
		return
	}
	defer b.end()
	if dx != nil || dcol != nil {
		b.launch("ga_broadcast_add_bwd_rows", Dim3{X: uint32(rows)}, rowBlock(C), ptr(dx), ptr(dcol), ptr(dy), int32(C))
	}
	if drow != nil {
		batch := dy.Size() / (M * C)
		b.launch("ga_broadcast_add_bwd_cols", Dim3{X: uint32((C + gaBlock - 1) / gaBlock), Y: uint32(batch)}, blk,
			ptr(drow), ptr(dy), int32(M), int32(C))
	}
}

// prependRow: y (B, N+1, h) = [row; x[b]] per batch element; for a 2-D y (a
// mask) h is 1.
func (b *Backend) prependRow(y, x, row *engine.Tensor) {
	B := y.Dim(0)
	N1, h := y.Dim(-2), y.Dim(-1)
	if y.Rank() == 2 {
		N1, h = y.Dim(1), 1
	}
	if B == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_prepend_row", gridFor(B*N1*h), blk, ptr(y), ptr(x), ptr(row), int32(B), int32(N1), int32(h))
}
