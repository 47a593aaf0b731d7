package engine

// UnaryOp selects the function of Backend.Unary.
type UnaryOp int

// Unary functions; c is Unary's constant.
const (
	UnaryScale     UnaryOp = iota // c * x
	UnaryAddScalar                // x + c
	UnaryExp                      // exp(x)
	UnaryLog                      // log(x)
	UnarySquare                   // x^2
	UnarySqrt                     // sqrt(x)
)

// BinaryOp selects the function of Backend.Binary.
type BinaryOp int

// Binary functions; b has a's shape or (except for BinaryAdd) one element.
const (
	BinaryAdd BinaryOp = iota // a + b
	BinarySub                 // a - b
	BinaryMul                 // a * b
	BinaryDiv                 // a / b
)

// ReduceOp selects the whole-tensor reduction of Backend.Reduce.
type ReduceOp int

// Whole-tensor reductions to one element.
const (
	ReduceSum        ReduceOp = iota // sum x
	ReduceSumSquares                 // sum x^2
)

// Backend is a device: memory, copies, GEMMs, elementwise maps and
// reductions, and the fused kernels of the ops that need more, by name
// (Kernel). Model code never calls it; a new device implements it
// (kernels, not model code).
//
// Conventions, for the methods and the fused kernels alike: tensors are
// dense row-major views (Storage, Offset, Size); outputs of forward kernels
// are overwritten; gradient arguments (named d*) are accumulated into (+=)
// unless a flag or beta says to overwrite, and may be nil, meaning "not
// needed: skip that work". Shapes were validated by the Tape, which also
// checks that every input lives on this backend (or, for a Wrapper, on the
// backend it wraps).
type Backend interface {
	// Name describes the device and its libraries, e.g. "cpu (2 workers, OpenBLAS 0.3.21 ...)".
	Name() string
	// Close releases what the backend holds (worker goroutines, device
	// memory); tensors on it must not be used afterwards. A second Close
	// does nothing.
	Close() error
	// Alloc returns n zeroed elements.
	Alloc(n int) (Storage, error)
	// Upload copies host data into t (len(src) == t.Size()).
	Upload(t *Tensor, src []float32)
	// Download copies t to the host (len(dst) == t.Size()).
	Download(dst []float32, t *Tensor)
	// DownloadRange copies len(dst) elements of t from element off.
	DownloadRange(dst []float32, t *Tensor, off int)
	// Fill sets every element of t to v.
	Fill(t *Tensor, v float32)
	// Axpy is y += alpha * x over Size() elements.
	Axpy(y *Tensor, alpha float32, x *Tensor)
	// Copy2D copies (or with accumulate, adds) a rows x cols block between
	// strided row layouts: dst[dstOff + r*dstLd + j] (+)= src[srcOff + r*srcLd + j].
	// A zero srcLd repeats one source row; a zero dstLd sums all rows into one
	// (only with accumulate).
	Copy2D(dst *Tensor, dstOff, dstLd int, src *Tensor, srcOff, srcLd int, rows, cols int, accumulate bool)
	// Transpose: x: (..., n, m) -> y: (..., m, n), accumulating when asked.
	Transpose(y, x *Tensor, accumulate bool)

	// Gemm is C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, row-major,
	// op(A_i): (m, k), op(B_i): (k, n), C_i: (m, n), matrices stored
	// contiguously one after another.
	Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, b *Tensor, beta float32, c *Tensor)
	// GemmStrided is Gemm with the matrices of the batch strideA, strideB
	// and strideC elements apart: A_i starts at element i*strideA of a. A
	// stride of 0 uses one matrix in every product (one input shared by
	// a stack of weights, as a fused q/k/v projection); strideC must keep
	// the products' C_i apart (>= m*n).
	GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a *Tensor, strideA int, b *Tensor, strideB int, beta float32, c *Tensor, strideC int)

	// Unary: y = f(x, c).
	Unary(op UnaryOp, y, x *Tensor, c float32)
	// UnaryBackward accumulates dx given x and the forward output y.
	UnaryBackward(op UnaryOp, dx, dy, x, y *Tensor, c float32)
	// Binary: y = f(a, b); b has a's shape or one element.
	Binary(op BinaryOp, y, a, b *Tensor)
	// BinaryBackward accumulates da and db (summed when b is one element).
	BinaryBackward(op BinaryOp, da, db, dy, a, b *Tensor)
	// AdamW updates one parameter tensor p in place from its gradient g and
	// moments m, v (all the same size), as AdamWStep describes, and sets g
	// to zero.
	AdamW(p, g, m, v *Tensor, s AdamWStep)

	// Reduce: x -> y: one element.
	Reduce(op ReduceOp, y, x *Tensor)
	// ReduceBackward accumulates dx from the scalar dy.
	ReduceBackward(op ReduceOp, dx, dy, x *Tensor)
	// SumSquaresHost returns sum x^2 in float64 on the host (NaN/Inf when x
	// holds any); used by clipping and the finiteness check.
	SumSquaresHost(x *Tensor) float64

	// Kernel is the fused kernel registered under name: a value of the type
	// the op's file declares beside the name (KernelAttention is an
	// AttentionKernels, ...), or nil when the backend has none.
	Kernel(name string) any
}

// AdamWStep holds the scalars of one AdamW update of one tensor:
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= LR*Decay*p; p -= LR * (m/BiasCorr1) / (sqrt(v/BiasCorr2) + Eps).
type AdamWStep struct {
	LR, Beta1, Beta2, Eps float32
	Decay                 float32 // weight decay coefficient, 0 for tensors not decayed
	BiasCorr1, BiasCorr2  float32 // 1 - b1^t and 1 - b2^t at step t (1-based)
}

// Wrapper is implemented by a backend that wraps another and allocates
// through it (a test double that injects faults, a decorator that counts):
// the tape accepts tensors of every backend the Unwrap chain reaches.
type Wrapper interface {
	// Unwrap is the wrapped backend.
	Unwrap() Backend
}

// Syncer is implemented by asynchronous backends (CUDA): kernels are queued
// and run later, so clocks must wait for them and errors surface late.
type Syncer interface {
	// Sync waits for all queued work and returns the first error any
	// backend call raised since the backend was opened (sticky).
	Sync() error
}

// Errer is implemented by backends whose kernels can fail (out of device
// memory, a failed launch): Backend methods return nothing, so the first
// failure is kept and reported here.
type Errer interface {
	// Err is the first error a backend call raised, nil if none.
	Err() error
}

// FLOPCounter is implemented by backends that count the floating-point
// operations of their GEMMs (2·m·n·k per product): benchmarks divide the
// change over a step by its time to report achieved FLOP/s and MFU.
type FLOPCounter interface {
	// GemmFLOPs is the running total since the backend was opened.
	GemmFLOPs() int64
}

// Sync waits for be's queued work (nothing to wait for on a synchronous
// backend) and returns its first error, if it keeps one.
func Sync(be Backend) error {
	if s, ok := be.(Syncer); ok {
		return s.Sync()
	}
	return BackendErr(be)
}

// BackendErr returns be's first error without waiting (nil when be keeps
// none).
func BackendErr(be Backend) error {
	if e, ok := be.(Errer); ok {
		return e.Err()
	}
	return nil
}
