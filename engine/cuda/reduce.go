package cuda

import (
	"math"
	"unsafe"

	"github.com/gelo-research/geloattack/engine"
)

// reduceTo sums x (or its squares) in a fixed order into out (float) and/or
// outd (double) times scale, adding to out when accumulate.
func (b *Backend) reduceTo(out, outd DevicePtr, x DevicePtr, n int, squares bool, scale float64, accumulate bool) {
	part := b.scratchPtr(slotPartial, 2*reduceParts)
	b.launch("ga_reduce_partial", Dim3{X: reduceParts}, blk, part, x, int64(n), b2i(squares))
	b.launch("ga_finish_sum", Dim3{X: 1}, blk, out, outd, part, int32(reduceParts), scale, b2i(accumulate))
}

// Reduce: y = sum x or sum x^2.
func (b *Backend) Reduce(op engine.ReduceOp, y, x *engine.Tensor) {
	if !b.begin() {
		return
	}
	defer b.end()
	b.wrote(y)
	b.reduceTo(ptr(y), 0, ptr(x), x.Size(), op == engine.ReduceSumSquares, 1, false)
}

// ReduceBackward accumulates dx from the scalar dy.
func (b *Backend) ReduceBackward(op engine.ReduceOp, dx, dy, x *engine.Tensor) {
	if dx == nil || dx.Size() == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.wrote(dx)
	n := dx.Size()
	b.launch("ga_reduce_bwd", gridFor(n), blk, int32(op), ptr(dx), ptr(dy), ptr(x), int64(n))
}

// SumSquaresHost returns sum x^2 (double accumulation) on the host.
func (b *Backend) SumSquaresHost(x *engine.Tensor) float64 {
	if !b.begin() {
		return math.NaN()
	}
	defer b.end()
	b.reduceTo(0, b.oneD, ptr(x), x.Size(), true, 1, false)
	var v float64
	b.fail(b.dev.downloadBytes(unsafe.Pointer(&v), b.oneD, 8))
	if b.Err() != nil {
		return math.NaN()
	}
	return v
}
