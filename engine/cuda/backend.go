package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gelo-research/geloattack/engine"
)

// Precisions of Backend's GEMMs. Everything else (norms, softmax, the
// optimizer, the master weights) is fp32 whatever the precision.
const (
	// PrecisionFP32 multiplies in full fp32 (no tensor-core rounding).
	PrecisionFP32 = "fp32"
	// PrecisionTF32 lets cuBLAS round GEMM inputs to tf32 (10-bit mantissa)
	// on the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
	PrecisionTF32 = "tf32"
	// PrecisionBF16 rounds GEMM inputs to bf16 (7-bit mantissa) with a
	// kernel and multiplies bf16 x bf16 on the tensor cores, accumulating
	// in fp32: the usual mixed-precision training recipe.
	PrecisionBF16 = "bf16"
)

// ValidPrecision returns nil for "", fp32, tf32 and bf16.
func ValidPrecision(p string) error {
	switch p {
	case "", PrecisionFP32, PrecisionTF32, PrecisionBF16:
		return nil
	}
	return fmt.Errorf("precision %q: want fp32, tf32 or bf16", p)
}

// BackendOptions configure NewBackend.
type BackendOptions struct {
	// Device says which GPU and where the libraries are.
	Device Options
	// Precision is fp32 (the default when empty), tf32 or bf16.
	Precision string
	// FusedAttention computes attention of heads up to 32 wide with the
	// fused kernels of flash.cu instead of cuBLAS products over
	// materialised score matrices; also set by
	// GELOATTACK_CUDA_ATTENTION=fused. Off by default: on an H100 the fused
	// fp32 kernels made the paper step slower (52 ms against 41 ms).
	FusedAttention bool
	// Profile times every device call (see ProfileReport); also turned on
	// by the environment variable GELOATTACK_CUDA_PROFILE=1.
	Profile bool
}

// Backend is engine.Backend on one CUDA device. Every method queues work on
// the device's one stream and returns without waiting; Download, Item and
// Sync wait. Activations, gradients and optimizer state live on the device;
// only what the caller downloads comes back.
//
// Backend methods cannot return errors (engine.Backend has none), so the
// first failure (a launch, cuBLAS, out of memory) is kept: Err returns it,
// Sync returns it, and later calls do nothing. The engine's Tape.Backward
// reports it.
//
// A Backend may be used from any goroutine, one at a time (as the engine
// does): each call makes the device's context current on its OS thread.
type Backend struct {
	dev     *Device
	prec    string
	compute int32 // cuBLAS compute type of every GEMM

	mu    sync.Mutex // guards err
	err   error
	flops int64
	calls int64 // kernel launches and cuBLAS calls
	held  int64 // bytes allocated by Alloc and scratch
	peak  int64
	owned []DevicePtr // every allocation, freed by Close

	prof *profiler // nil unless profiling
	// curThread is the OS thread begin last made the context current on.
	curThread int
	stage     *stager // page-locked upload buffers, made on first use
	// stageFailed records that page-locked memory could not be had.
	stageFailed bool
	flash       bool // attention in flash.cu where the head width allows
	scratch     [scratchSlots]scratchBuf
	oneD        DevicePtr // one double, SumSquaresHost's result
}

// Scratch slots: attention's head-split copies and score matrices, the
// reductions' partial sums. Work on the one stream runs in order, so a slot
// is reused by each call once the previous user's kernels are queued.
const (
	slotQ = iota
	slotK
	slotV
	slotS
	slotO
	slotDP
	slotDQ
	slotDK
	slotDV
	slotPartial
	slotRows
	slotA16 // bf16 copies of GEMM operands
	slotB16
	scratchSlots
)

type scratchBuf struct {
	p DevicePtr
	n int // float32 elements
}

// reduceParts is the number of blocks of a whole-tensor reduction: fixed, so
// that the summation order, and hence the result, never changes.
const reduceParts = 264

// storage is one device allocation.
type storage struct {
	be *Backend
	p  DevicePtr
	n  int
}

// Backend returns the owning backend.
func (s *storage) Backend() engine.Backend { return s.be }

// Len is the number of float32 elements.
func (s *storage) Len() int { return s.n }

var _ engine.Backend = (*Backend)(nil)
var _ engine.Syncer = (*Backend)(nil)
var _ engine.FLOPCounter = (*Backend)(nil)

// NewBackend opens the device (see Open) and checks that the kernels are
// there. Errors match ErrNoDevice.
func NewBackend(opts BackendOptions) (*Backend, error) {
	if err := ValidPrecision(opts.Precision); err != nil {
		return nil, err
	}
	prec := opts.Precision
	if prec == "" {
		prec = PrecisionFP32
	}
	d, err := Open(opts.Device)
	if err != nil {
		return nil, err
	}
	for _, k := range requiredKernels {
		if _, ok := d.funcs[k]; !ok {
			d.Close()
			return nil, &NoDeviceError{Why: fmt.Sprintf("kernel %s not loaded (%d kernels embedded; rebuild the PTX with scripts/build-ptx.sh)", k, len(d.funcs))}
		}
	}
	b := &Backend{dev: d, prec: prec, compute: cublasCompute32F, curThread: -1}
	if prec == PrecisionTF32 {
		b.compute = cublasCompute32FFastTF32
	}
	if opts.Profile || os.Getenv("GELOATTACK_CUDA_PROFILE") == "1" {
		b.prof = &profiler{total: map[string]*profStat{}}
	}
	b.flash = opts.FusedAttention || os.Getenv("GELOATTACK_CUDA_ATTENTION") == "fused"
	b.oneD = b.alloc(2)
	if err := b.Err(); err != nil {
		_ = b.Close() // the allocation error is the one to report
		return nil, &NoDeviceError{Why: err.Error(), Err: err}
	}
	return b, nil
}

// requiredKernels are the entry points the backend launches.
var requiredKernels = []string{
	"ga_axpy", "ga_unary", "ga_unary_bwd", "ga_binary", "ga_binary_bwd", "ga_binary_bwd_b_partial",
	"ga_swiglu", "ga_swiglu_bwd", "ga_copy2d", "ga_colsum", "ga_transpose", "ga_broadcast_add",
	"ga_broadcast_add_bwd_rows", "ga_broadcast_add_bwd_cols", "ga_scale_rows", "ga_prepend_row",
	"ga_rmsnorm", "ga_rmsnorm_bwd_dx", "ga_rmsnorm_bwd_dw_partial", "ga_finish_cols", "ga_l2norm",
	"ga_l2norm_bwd", "ga_row_lse", "ga_row_norm", "ga_row_reduce_bwd", "ga_mean_pool",
	"ga_mean_pool_bwd", "ga_infonce_rows", "ga_infonce_bwd", "ga_reduce_partial", "ga_finish_sum",
	"ga_reduce_bwd", "ga_split_heads", "ga_merge_heads", "ga_attn_softmax", "ga_attn_recompute_p",
	"ga_attn_softmax_bwd", "ga_adamw", "ga_to_bf16", "ga_to_bf16x4", "ga_flash_fwd", "ga_flash_bwd_dq", "ga_flash_bwd_dkv",
}

// Device is the opened GPU.
func (b *Backend) Device() *Device { return b.dev }

// Precision is the GEMM precision: fp32, tf32 or bf16.
func (b *Backend) Precision() string { return b.prec }

// Name describes the device, its libraries and the precision.
func (b *Backend) Name() string { return b.dev.Name() + "; precision " + b.prec }

// Err is the first error any call raised.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// fail records err if it is the first.
func (b *Backend) fail(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = fmt.Errorf("cuda: %w", err)
	}
	b.mu.Unlock()
}

// begin makes the context current on this thread; false when an earlier
// error stopped the backend.
//
// The driver's current context is per OS thread, so begin also locks the
// calling goroutine to its thread until the matching end: a goroutine
// moved between making the context current and calling the driver would
// find no context (CUDA_ERROR_INVALID_CONTEXT). Calls nest.
func (b *Backend) begin() bool {
	runtime.LockOSThread()
	if b.Err() != nil {
		runtime.UnlockOSThread()
		return false
	}
	// Every backend of the process shares the device's primary context, so
	// a thread that was made current once stays current.
	if t := osThread(); t < 0 || t != b.curThread {
		if err := b.dev.MakeCurrent(); err != nil {
			b.fail(err)
			runtime.UnlockOSThread()
			return false
		}
		b.curThread = t
	}
	return true
}

// end releases the thread that begin locked.
func (b *Backend) end() { runtime.UnlockOSThread() }

// Sync waits for the queued work and returns the first error.
func (b *Backend) Sync() error {
	if b.begin() {
		defer b.end()
		b.fail(b.dev.Sync())
	}
	return b.Err()
}

// GemmFLOPs counts 2·m·n·k per product of every Gemm and attention product.
func (b *Backend) GemmFLOPs() int64 { return b.flops }

// Calls counts kernel launches and cuBLAS calls queued so far.
func (b *Backend) Calls() int64 { return b.calls }

// PeakBytes is the most device memory the backend held at once.
func (b *Backend) PeakBytes() int64 { return b.peak }

// HeldBytes is the device memory the backend holds now.
func (b *Backend) HeldBytes() int64 { return b.held }

// Close waits for the queued work and frees every allocation; tensors of
// the backend must not be used afterwards (calls then do nothing and Err
// says the backend is closed). A second Close does nothing. Errors of the
// queued work stay with Err and Sync: Close itself always succeeds.
func (b *Backend) Close() error {
	if b.dev == nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.dev.MakeCurrent() == nil {
		b.dev.Sync()
		if b.stage != nil {
			b.freeStage(b.stage)
			b.stage = nil
		}
		for _, p := range b.owned {
			b.dev.Free(p)
		}
	}
	b.owned, b.held = nil, 0
	b.dev.Close()
	b.dev = nil
	b.fail(errors.New("backend closed"))
	return nil
}

// alloc returns n zeroed float32 elements, recording failures.
func (b *Backend) alloc(n int) DevicePtr {
	if n <= 0 {
		n = 1
	}
	if !b.begin() {
		return 0
	}
	defer b.end()
	p, err := b.dev.Alloc(n)
	if err != nil {
		var free, total uint64
		b.dev.Drv.cuMemGetInfo(&free, &total)
		b.fail(fmt.Errorf("allocate %d MiB (backend holds %d MiB, device has %d MiB free of %d): %w",
			int64(n)*4>>20, b.held>>20, free>>20, total>>20, err))
		return 0
	}
	b.owned = append(b.owned, p)
	b.held += int64(n) * 4
	b.peak = max(b.peak, b.held)
	return p
}

// Alloc returns n zeroed elements of device memory.
func (b *Backend) Alloc(n int) (engine.Storage, error) {
	p := b.alloc(n)
	if err := b.Err(); err != nil {
		return nil, err
	}
	return &storage{be: b, p: p, n: n}, nil
}

// scratch returns slot's buffer of at least n float32 elements, growing it
// (after the queued work that may still read the old one).
func (b *Backend) scratchPtr(slot, n int) DevicePtr {
	s := &b.scratch[slot]
	if s.n >= n {
		return s.p
	}
	if s.p != 0 {
		b.fail(b.dev.Sync())
		b.fail(b.dev.Free(s.p))
		for i, p := range b.owned {
			if p == s.p {
				b.owned = append(b.owned[:i], b.owned[i+1:]...)
				break
			}
		}
		b.held -= int64(s.n) * 4
		s.p, s.n = 0, 0
	}
	n = max(n, 1024)
	s.p = b.alloc(n)
	if s.p != 0 {
		s.n = n
	}
	return s.p
}

// ptr is the device address of t's first element; 0 for a nil tensor.
func ptr(t *engine.Tensor) DevicePtr {
	if t == nil {
		return 0
	}
	st, ok := t.Storage().(*storage)
	if !ok {
		return 0
	}
	return st.p + DevicePtr(4*t.Offset())
}

// at is the address of element off of t.
func at(t *engine.Tensor, off int) DevicePtr { return ptr(t) + DevicePtr(4*off) }

// launch queues a kernel, recording a failure.
func (b *Backend) launch(name string, grid, block Dim3, args ...any) {
	b.calls++
	if b.prof != nil {
		b.profStart(name)
		defer b.profStop()
	}
	b.fail(b.dev.Launch(name, grid, block, 0, args...))
}

// gridFor is the grid of a grid-stride elementwise kernel over n elements.
func gridFor(n int) Dim3 {
	g := (n + gaBlock - 1) / gaBlock
	return Dim3{X: uint32(min(max(g, 1), 4096))}
}

// warpRows is the grid of a one-warp-per-row kernel over rows (GA_BLOCK/32
// rows per block).
func warpRows(rows int) Dim3 {
	per := gaBlock / 32
	return Dim3{X: uint32((rows + per - 1) / per)}
}

// rowBlock is the block size of a one-block-per-row kernel over rows of n.
func rowBlock(n int) Dim3 {
	t := (n + 31) / 32 * 32
	return Dim3{X: uint32(min(max(t, 32), 256))}
}

const gaBlock = 256

var blk = Dim3{X: gaBlock}

func b2i(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

// Upload copies host data into t.
func (b *Backend) Upload(t *engine.Tensor, src []float32) {
	if b.begin() {
		defer b.end()
		if b.prof != nil {
			b.profStart("upload")
			defer b.profStop()
		}
		if len(src)*4 >= stageMinBytes && !b.stageFailed && b.uploadStaged(ptr(t), src) {
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
	b.launch("ga_axpy", gridFor(n), blk, ptr(y), alpha, ptr(x), int64(n))
}

// Copy2D copies or accumulates a strided block (see engine.Backend).
func (b *Backend) Copy2D(dst *engine.Tensor, dstOff, dstLd int, src *engine.Tensor, srcOff, srcLd int, rows, cols int, accumulate bool) {
	if rows == 0 || cols == 0 || !b.begin() {
		return
	}
	defer b.end()
	if dstLd == 0 {
		b.launch("ga_colsum", Dim3{X: uint32((cols + gaBlock - 1) / gaBlock)}, blk,
			at(dst, dstOff), at(src, srcOff), int32(srcLd), int32(rows), int32(cols))
		return
	}
	b.launch("ga_copy2d", Dim3{X: uint32((cols + gaBlock - 1) / gaBlock), Y: uint32(min(rows, 65535))}, blk, at(dst, dstOff), int32(dstLd), at(src, srcOff), int32(srcLd),
		int32(rows), int32(cols), b2i(accumulate))
}

// Gemm is the batched row-major product of engine.Backend.Gemm, in the
// backend's precision.
func (b *Backend) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, bm *engine.Tensor, beta float32, c *engine.Tensor) {
	if !b.begin() {
		return
	}
	defer b.end()
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
	b.gemmStrided(transA, transB, batch, m, n, k, alpha, ptr(a), strideA, ptr(bm), strideB, beta, ptr(c), strideC)
}

// gemm is Gemm on device addresses.
func (b *Backend) gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, bm DevicePtr, beta float32, c DevicePtr) {
	b.gemmStrided(transA, transB, batch, m, n, k, alpha, a, m*k, bm, k*n, beta, c, m*n)
}

// gemmStrided is GemmStrided on device addresses.
func (b *Backend) gemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a DevicePtr, strideA int, bm DevicePtr, strideB int, beta float32, c DevicePtr, strideC int) {
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
	d.alpha, d.beta = alpha, beta
	var in uintptr = DataFloat32
	if b.prec == PrecisionBF16 {
		// Real bf16 inputs: cuBLAS's FAST_16BF compute type on fp32
		// operands ran tf32 kernels (bit-identical results) on an H100.
		// The copies keep the strides: a shared matrix is rounded once.
		a, bm = b.toBF16(slotA16, a, (batch-1)*strideA+m*k), b.toBF16(slotB16, bm, (batch-1)*strideB+k*n)
		in = DataBFloat16
	}
	r, _, _ := purego.SyscallN(d.Blas.gemmSBEx, d.handle, uintptr(o1), uintptr(o2), uintptr(n), uintptr(m), uintptr(k),
		uintptr(unsafe.Pointer(&d.alpha)), uintptr(bm), in, uintptr(ldb), uintptr(strideB),
		uintptr(a), in, uintptr(lda), uintptr(strideA),
		uintptr(unsafe.Pointer(&d.beta)), uintptr(c), DataFloat32, uintptr(ldc), uintptr(strideC),
		uintptr(batch), uintptr(b.compute), uintptr(uint32(cublasGemmDefault&0xffffffff)))
	b.fail(cublasCheck("cublasGemmStridedBatchedEx", int32(r)))
}

func tn(t bool) string {
	if t {
		return "T"
	}
	return "N"
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

// RMSNorm: y = x rstd w with rstd = 1/sqrt(mean x^2 + eps) per row.
func (b *Backend) RMSNorm(y, rstd, x, w *engine.Tensor, eps float32) {
	M, h := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_rmsnorm", Dim3{X: uint32(M)}, rowBlock(h), ptr(y), ptr(rstd), ptr(x), ptr(w), int32(h), eps)
}

// rmsRowsPer is the rows per chunk of RMSNormBackward's dw partial sums.
const rmsRowsPer = 64

// RMSNormBackward accumulates dx and dw.
func (b *Backend) RMSNormBackward(dx, dw, dy, x, w, rstd *engine.Tensor) {
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

// Attention is masked multi-head attention: the products are strided-batched
// GEMMs over batch*heads, the softmax a kernel (attention.cu).
func (b *Backend) Attention(o, lse, q, k, v, mask *engine.Tensor, heads int) {
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

// AttentionBackward recomputes P from q, k and lse and accumulates dq, dk,
// dv (any may be nil).
func (b *Backend) AttentionBackward(dq, dk, dv, do, q, k, v, mask, o, lse *engine.Tensor, heads int) {
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

// SwiGLU: y = silu(gate) up.
func (b *Backend) SwiGLU(y, gate, up *engine.Tensor) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_swiglu", gridFor(n), blk, ptr(y), ptr(gate), ptr(up), int64(n))
}

// SwiGLUBackward writes or accumulates dgate and dup.
func (b *Backend) SwiGLUBackward(dgate, dup, dy, gate, up *engine.Tensor, accGate, accUp bool) {
	n := dy.Size()
	if n == 0 || (dgate == nil && dup == nil) || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_swiglu_bwd", gridFor(n), blk, ptr(dgate), ptr(dup), ptr(dy), ptr(gate), ptr(up), b2i(accGate), b2i(accUp), int64(n))
}

// Unary: y = f(x, c).
func (b *Backend) Unary(op engine.UnaryOp, y, x *engine.Tensor, c float32) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_unary", gridFor(n), blk, int32(op), ptr(y), ptr(x), c, int64(n))
}

// UnaryBackward accumulates dx.
func (b *Backend) UnaryBackward(op engine.UnaryOp, dx, dy, x, y *engine.Tensor, c float32) {
	n := dy.Size()
	if n == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_unary_bwd", gridFor(n), blk, int32(op), ptr(dx), ptr(dy), ptr(x), ptr(y), c, int64(n))
}

// Binary: y = a op b; b has a's shape or one element.
func (b *Backend) Binary(op engine.BinaryOp, y, a, bt *engine.Tensor) {
	n := y.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_binary", gridFor(n), blk, int32(op), ptr(y), ptr(a), ptr(bt), b2i(bt.Size() == 1 && n != 1), int64(n))
}

// BinaryBackward accumulates da and db (summed for a one-element b).
func (b *Backend) BinaryBackward(op engine.BinaryOp, da, db, dy, a, bt *engine.Tensor) {
	n := dy.Size()
	if n == 0 || (da == nil && db == nil) || !b.begin() {
		return
	}
	defer b.end()
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

// ScaleRows: y[r, :] (+)= x[r, :] s[r].
func (b *Backend) ScaleRows(y, x, s *engine.Tensor, accumulate bool) {
	rows, h := s.Size(), x.Cols()
	if rows == 0 || h == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_scale_rows", gridFor(rows*h), blk, ptr(y), ptr(x), ptr(s), int32(h), int64(rows), b2i(accumulate))
}

// MeanPool: y (B, h) = mean of the real rows of x (B, N, h).
func (b *Backend) MeanPool(y, x, mask *engine.Tensor) {
	B, N, h := x.Dim(0), x.Dim(1), x.Dim(2)
	if B == 0 || h == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_mean_pool", Dim3{X: uint32((h + gaBlock - 1) / gaBlock), Y: uint32(B)}, blk, ptr(y), ptr(x), ptr(mask), int32(N), int32(h))
}

// MeanPoolBackward accumulates dx (B, N, h) from dy (B, h).
func (b *Backend) MeanPoolBackward(dx, dy, mask *engine.Tensor) {
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

// L2Normalize: y = x / max(||x||, eps) per row, norm = ||x||.
func (b *Backend) L2Normalize(y, norm, x *engine.Tensor, eps float32) {
	M, e := x.Rows(), x.Cols()
	if M == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_l2norm", Dim3{X: uint32(M)}, rowBlock(e), ptr(y), ptr(norm), ptr(x), int32(e), eps)
}

// L2NormalizeBackward accumulates dx.
func (b *Backend) L2NormalizeBackward(dx, dy, y, norm *engine.Tensor, eps float32) {
	M, e := y.Rows(), y.Cols()
	if M == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_l2norm_bwd", Dim3{X: uint32(M)}, rowBlock(e), ptr(dx), ptr(dy), ptr(y), ptr(norm), int32(e), eps)
}

// RowReduce: y (M) = log-sum-exp or norm of each row of x (M, C).
func (b *Backend) RowReduce(op engine.RowOp, y, x *engine.Tensor) {
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

// RowReduceBackward accumulates dx.
func (b *Backend) RowReduceBackward(op engine.RowOp, dx, dy, x, y *engine.Tensor) {
	M, C := x.Rows(), x.Cols()
	if M == 0 || C == 0 || dx == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_row_reduce_bwd", gridFor(M*C), blk, int32(op), ptr(dx), ptr(dy), ptr(x), ptr(y), int32(C), int64(M))
}

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
	b.reduceTo(ptr(y), 0, ptr(x), x.Size(), op == engine.ReduceSumSquares, 1, false)
}

// ReduceBackward accumulates dx from the scalar dy.
func (b *Backend) ReduceBackward(op engine.ReduceOp, dx, dy, x *engine.Tensor) {
	if dx == nil || dx.Size() == 0 || !b.begin() {
		return
	}
	defer b.end()
	n := dx.Size()
	b.launch("ga_reduce_bwd", gridFor(n), blk, int32(op), ptr(dx), ptr(dy), ptr(x), int64(n))
}

// InfoNCE: y = mean over rows of LSE(scores) - LSE(scores on positives).
func (b *Backend) InfoNCE(y, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	if B == 0 || !b.begin() {
		return
	}
	defer b.end()
	rl := b.scratchPtr(slotRows, B)
	b.launch("ga_infonce_rows", Dim3{X: uint32(B)}, rowBlock(C), rl, ptr(scores), ptr(pos), int32(C))
	b.reduceTo(ptr(y), 0, rl, B, false, 1/float64(B), false)
}

// InfoNCEBackward accumulates dscores from the scalar dy.
func (b *Backend) InfoNCEBackward(ds, dy, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	if B == 0 || ds == nil || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_infonce_bwd", Dim3{X: uint32(B)}, rowBlock(C), ptr(ds), ptr(dy), ptr(scores), ptr(pos), int32(B), int32(C))
}

// Transpose: y (..., m, n) (+)= x (..., n, m)^T.
func (b *Backend) Transpose(y, x *engine.Tensor, accumulate bool) {
	n, m := x.Dim(-2), x.Dim(-1)
	if n == 0 || m == 0 || !b.begin() {
		return
	}
	defer b.end()
	batch := x.Size() / (n * m)
	b.launch("ga_transpose", Dim3{X: uint32((m + 31) / 32), Y: uint32((n + 31) / 32), Z: uint32(batch)}, Dim3{X: 32, Y: 8},
		ptr(y), ptr(x), int32(n), int32(m), b2i(accumulate))
}

// BroadcastAdd: y = x + col (per row) + row (per column, per batch element).
func (b *Backend) BroadcastAdd(y, x, col, row *engine.Tensor) {
	M, C := x.Dim(-2), x.Dim(-1)
	rows := x.Rows()
	if rows == 0 || C == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_broadcast_add", gridFor(rows*C), blk, ptr(y), ptr(x), ptr(col), ptr(row), int32(M), int32(C), int64(rows))
}

// BroadcastAddBackward accumulates dx, dcol (row sums) and drow (column sums).
func (b *Backend) BroadcastAddBackward(dx, dcol, drow, dy *engine.Tensor) {
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

// PrependRow: y (B, N+1, h) = [row; x[b]] per batch element; for a 2-D y (a
// mask) h is 1.
func (b *Backend) PrependRow(y, x, row *engine.Tensor) {
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

// AdamW updates p from g (zeroing g) and the moments m, v.
func (b *Backend) AdamW(p, g, m, v *engine.Tensor, s engine.AdamWStep) {
	n := p.Size()
	if n == 0 || !b.begin() {
		return
	}
	defer b.end()
	b.launch("ga_adamw", gridFor(n), blk, ptr(p), ptr(g), ptr(m), ptr(v), int64(n),
		s.LR, s.Beta1, s.Beta2, s.Eps, s.Decay, s.BiasCorr1, s.BiasCorr2)
}
