package cuda

import "github.com/gelo-research/geloattack/engine"

// Upload copies host data into t.
func (b *Backend) Upload(t *engine.Tensor, src []float32) {
	if b.begin() {
		defer b.end()
		b.wrote(t)
		if b.prof != nil {
			b.profStart("upload")
			defer b.profStop()
		}
		// While a step is recorded, dev.Upload copies into the graphs' staging memory instead.
		if len(src)*4 >= stageMinBytes && !b.stageFailed && !b.dev.deferringUploads() && b.uploadStaged(ptr(t), src) {
			return
		}
		b.fail(b.dev.Upload(ptr(t), src))
	}
}

// Download copies t to the host after the queued work.
func (b *Backend) Download(dst []float32, t *engine.Tensor) {
	if b.begin() {
		defer b.end()
		b.fail(b.dev.Download(dst, ptr(t)))
	}
}

// DownloadRange copies len(dst) elements of t from element off.
func (b *Backend) DownloadRange(dst []float32, t *engine.Tensor, off int) {
	if b.begin() {
		defer b.end()
		b.fail(b.dev.Download(dst, at(t, off)))
	}
}

// Fill sets every element of t to v.
func (b *Backend) Fill(t *engine.Tensor, v float32) {
	if b.begin() {
		defer b.end()
		b.wrote(t)
		b.fail(b.dev.Fill(ptr(t), t.Size(), v))
	}
}

// Axpy is y += alpha x.
func (b *Backend) Axpy(y *engine.Tensor, alpha float32, x *engine.Tensor) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(y)
	b.launch("ga_axpy", gridFor(n), blk, ptr(y), alpha, ptr(x), int64(n))
}

// Copy2D copies or accumulates a strided block (see engine.Backend).
func (b *Backend) Copy2D(dst *engine.Tensor, dstOff, dstLd int, src *engine.Tensor, srcOff, srcLd int, rows, cols int, accumulate bool) {
	if rows == 0 || cols == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(dst)
	if dstLd == 0 {
		b.launch("ga_colsum", Dim3{X: uint32((cols + gaBlock - 1) / gaBlock)}, blk,
			at(dst, dstOff), at(src, srcOff), int32(srcLd), int32(rows), int32(cols))
		return
	}
	b.launch("ga_copy2d", Dim3{X: uint32((cols + gaBlock - 1) / gaBlock), Y: uint32(min(rows, 65535))}, blk, at(dst, dstOff), int32(dstLd), at(src, srcOff), int32(srcLd),
		int32(rows), int32(cols), b2i(accumulate))
}

// Transpose: y (..., m, n) (+)= x (..., n, m)^T.
func (b *Backend) Transpose(y, x *engine.Tensor, accumulate bool) {
	n, m := x.Dim(-2), x.Dim(-1)
	if n == 0 || m == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(y)
	batch := x.Size() / (n * m)
	b.launch("ga_transpose", Dim3{X: uint32((m + 31) / 32), Y: uint32((n + 31) / 32), Z: uint32(batch)}, Dim3{X: 32, Y: 8},
		ptr(y), ptr(x), int32(n), int32(m), b2i(accumulate))
}
