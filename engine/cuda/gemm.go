package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gelo-research/geloattack/engine"
)

// Gemm is the batched row-major product of engine.Backend.Gemm, in the
// backend's precision.
func (b *Backend) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, bm *engine.Tensor, beta float32, c *engine.Tensor) {
	if !b.begin() {
		return
	}
	defer b.end()
	b.wrote(c)
	b.gemm(transA, transB, batch, m, n, k, alpha, ptr(a), ptr(bm), beta, ptr(c))
}

// GemmStrided is engine.Backend.GemmStrided: one strided-batched cuBLAS call,
// where a zero stride shares one matrix across the batch (a fused q/k/v
// projection is one launch instead of three).
func (b *Backend) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a *engine.Tensor, strideA int, bm *engine.Tensor, strideB int, beta float32, c *engine.Tensor, strideC int) {
	if !b.begin() {
		return
	}
	defer b.end()
	b.wrote(c)
	b.gemmStrided(transA, transB, batch, m, n, k, alpha, ptr(a), strideA, ptr(bm), strideB, beta, ptr(c), strideC)
}

// gemm is Gemm on device addresses.
func (b *Backend) gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, bm DevicePtr, beta float32, c DevicePtr) {
	b.gemmStrided(transA, transB, batch, m, n, k, alpha, a, m*k, bm, k*n, beta, c, m*n)
}

// gemmStrided is GemmStrided on device addresses, in the backend's precision.
func (b *Backend) gemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a DevicePtr, strideA int, bm DevicePtr, strideB int, beta float32, c DevicePtr, strideC int) {
	b.gemmStridedIn(b.prec, b.compute, transA, transB, batch, m, n, k, alpha, a, strideA, bm, strideB, beta, c, strideC)
}

// gemmStridedIn is gemmStrided in precision prec with cuBLAS compute type compute: the
// backend's for the model's GEMMs, fp32 for data such as MixRows' U.
func (b *Backend) gemmStridedIn(prec string, compute int32, transA, transB bool, batch, m, n, k int, alpha float32, a DevicePtr, strideA int, bm DevicePtr, strideB int, beta float32, c DevicePtr, strideC int) {
	if batch == 0 || m == 0 || n == 0 {
		return
	}
	if k == 0 { // C = beta C: cuBLAS may not touch C when k is 0
		if strideC == m*n {
			b.scaleInPlace(c, batch*m*n, beta)
		} else {
			for i := range batch {
				b.scaleInPlace(c+DevicePtr(4*i*strideC), m*n, beta)
			}
		}
		return
	}
	b.calls++
	b.flops += 2 * int64(batch) * int64(m) * int64(n) * int64(k)
	o1, o2, lda, ldb, ldc := rowMajorGemmArgs(transA, transB, m, n, k)
	if b.prof != nil {
		b.profStart(fmt.Sprintf("gemm %s%s batch %d (%d, %d, %d)", tn(transA), tn(transB), batch, m, n, k))
		defer b.profStop()
	}
	d := b.dev
	var in uintptr = DataFloat32
	if prec == PrecisionBF16 {
		// Real bf16 inputs: cuBLAS's FAST_16BF compute type on fp32
		// operands ran tf32 kernels (bit-identical results) on an H100.
		// The copies keep the strides: a shared matrix is rounded once. A
		// weight AdamW keeps a fresh bf16 copy of is read from it.
		a, bm = b.bf16Operand(slotA16, a, (batch-1)*strideA+m*k), b.bf16Operand(slotB16, bm, (batch-1)*strideB+k*n)
		in = DataBFloat16
	}
	// cublasGemmStridedBatchedEx's arguments; alpha and beta (gemmAlpha, gemmBeta) go by address.
	args := [gemmArgs]uintptr{d.handle, uintptr(o1), uintptr(o2), uintptr(n), uintptr(m), uintptr(k),
		0, uintptr(bm), in, uintptr(ldb), uintptr(strideB),
		uintptr(a), in, uintptr(lda), uintptr(strideA),
		0, uintptr(c), DataFloat32, uintptr(ldc), uintptr(strideC),
		uintptr(batch), uintptr(compute), uintptr(uint32(cublasGemmDefault & 0xffffffff))}
	if d.rec != nil { // a step being recorded (graph.go): the scalars by value
		var w [gemmArgs]uint64
		for i, v := range args {
			w[i] = uint64(v)
		}
		w[gemmAlpha], w[gemmBeta] = uint64(math.Float32bits(alpha)), uint64(math.Float32bits(beta))
		d.rec.recordGemm(d.Blas.gemmSBEx, &w)
		return
	}
	d.alpha, d.beta = alpha, beta
	args[gemmAlpha], args[gemmBeta] = uintptr(unsafe.Pointer(&d.alpha)), uintptr(unsafe.Pointer(&d.beta))
	r, _, _ := purego.SyscallN(d.Blas.gemmSBEx, args[:]...)
	b.fail(cublasCheck("cublasGemmStridedBatchedEx", int32(r)))
}

func tn(t bool) string {
	if t {
		return "T"
	}
	return "N"
}

// bf16Operand is the bf16 form of the n elements at x: the weight copy AdamW keeps when it is
// fresh there (weights16.go), else x rounded into slot.
func (b *Backend) bf16Operand(slot int, x DevicePtr, n int) DevicePtr {
	if y, ok := b.bf16Copy(x, n); ok {
		return y
	}
	return b.toBF16(slot, x, n)
}

// toBF16 rounds n elements at x to bf16 into slot and returns the copy.
func (b *Backend) toBF16(slot int, x DevicePtr, n int) DevicePtr {
	y := b.scratchPtr(slot, (n+1)/2)
	if x%16 == 0 && n%4 == 0 {
		b.launch("ga_to_bf16x4", gridFor(n/4), blk, y, x, int64(n/4))
	} else {
		b.launch("ga_to_bf16", gridFor(n), blk, y, x, int64(n))
	}
	return y
}

// scaleInPlace is c *= beta over n elements (zero when beta is 0, so that
// NaN in c does not survive, as BLAS's beta = 0).
func (b *Backend) scaleInPlace(c DevicePtr, n int, beta float32) {
	if beta == 0 {
		b.fail(b.dev.Fill(c, n, 0))
		return
	}
	if beta != 1 {
		b.launch("ga_unary", gridFor(n), blk, int32(engine.UnaryScale), c, c, beta, int64(n))
	}
}
