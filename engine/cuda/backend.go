package cuda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"

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
	// Graphs runs training steps (BeginStep, EndStep) as CUDA graphs (graph.go); the zero
	// value, GraphsFromEnv, lets GELOATTACK_CUDA_GRAPHS decide (off when unset).
	Graphs GraphMode
	// GraphLog receives graph mode's fallback reasons and its summary at Close (default
	// standard error).
	GraphLog io.Writer
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
	oneD        DevicePtr      // one double, SumSquaresHost's result
	kernels     map[string]any // fused kernels by name; see kernelTable
	// copies are the bf16 copies of the storages AdamW updates (weights16.go); noCopies turns
	// them off (GELOATTACK_CUDA_BF16_WEIGHTS=off).
	copies   map[*storage]*weightCopy
	noCopies bool
	// graphs records training steps and keeps their CUDA graphs (graph.go); nil when off.
	graphs *stepGraphs
	gdrv   *deviceGraphs
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
var _ engine.StepRecorder = (*Backend)(nil) // engine.RecordStep brackets training steps through it

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
			return nil, &NoDeviceError{Why: fmt.Sprintf("kernel %s not loaded (%d kernels from %s; rebuild the PTX with scripts/build-ptx.sh)", k, len(d.funcs), d.ptxFrom)}
		}
	}
	b := &Backend{dev: d, prec: prec, compute: cublasCompute32F, curThread: -1}
	kernels, err := usableKernels(b.kernelTable(), func(k string) bool { _, ok := d.funcs[k]; return ok })
	if err != nil {
		d.Close()
		return nil, &NoDeviceError{Why: fmt.Sprintf("%v (%d kernels from %s)", err, len(d.funcs), d.ptxFrom), Err: err}
	}
	b.kernels = kernels
	if prec == PrecisionTF32 {
		b.compute = cublasCompute32FFastTF32
	}
	if opts.Profile || os.Getenv("GELOATTACK_CUDA_PROFILE") == "1" {
		b.prof = &profiler{total: map[string]*profStat{}}
	}
	b.flash = opts.FusedAttention || os.Getenv("GELOATTACK_CUDA_ATTENTION") == "fused"
	b.noCopies = weightCopiesOff()
	b.oneD = b.alloc(2)
	if err := b.initGraphs(opts); err != nil {
		_ = b.Close()
		return nil, err
	}
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

// Name describes the device, its libraries and the precision, and says
// which optional fused kernels (optionalKernels) are missing.
func (b *Backend) Name() string {
	s := b.dev.Name() + "; precision " + b.prec
	if missing := b.missingOptional(); len(missing) > 0 {
		s += fmt.Sprintf("; without %v (entry points not in the loaded PTX: rebuild %s with scripts/build-ptx.sh)", missing, lmModule)
	}
	return s
}

// missingOptional lists the optional fused kernels not registered, sorted.
func (b *Backend) missingOptional() []string {
	var out []string
	for name := range optionalKernels {
		if _, ok := b.kernels[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

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
		b.closeGraphs()
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
