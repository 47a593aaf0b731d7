package cuda

import "fmt"

// cuBLAS and CUDA library enum values (cublas_api.h, library_types.h).
const (
	cublasOpN = 0 // CUBLAS_OP_N
	cublasOpT = 1 // CUBLAS_OP_T

	// DataFloat32 is CUDA_R_32F.
	DataFloat32 = 0
	// DataBFloat16 is CUDA_R_16BF.
	DataBFloat16 = 14

	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F
	// cublasCompute32FFastTF32 lets cuBLAS round fp32 inputs to tf32 for
	// the tensor cores, accumulating in fp32. (CUBLAS_COMPUTE_32F_FAST_16BF,
	// 75, the bf16 analogue, gave results bit-identical to tf32 on an H100
	// with cuBLAS 13.1: precision bf16 converts its inputs itself.)
	cublasCompute32FFastTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	cublasGemmDefault        = -1 // CUBLAS_GEMM_DEFAULT
)

// cublasStatusNames names cublasStatus_t values.
var cublasStatusNames = map[int32]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// CublasError is a failed cuBLAS call.
type CublasError struct {
	Call   string
	Status int32
}

// Error is e.g. "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE".
func (e *CublasError) Error() string {
	n, ok := cublasStatusNames[e.Status]
	if !ok {
		n = fmt.Sprintf("cublasStatus %d", e.Status)
	}
	return e.Call + ": " + n
}

func cublasCheck(call string, st int32) error {
	if st == 0 {
		return nil
	}
	return &CublasError{Call: call, Status: st}
}

// Cublas holds the bound entry points of cuBLAS (column-major, as the C
// API). Backend.gemm maps the engine's row-major layout onto them.
type Cublas struct {
	// Path is the cuBLAS file loaded; LtPath is cuBLASLt's ("" when it was
	// left to the dynamic loader).
	Path, LtPath string
	lib, lt      *library

	cublasCreate     func(h *uintptr) int32
	cublasDestroy    func(h uintptr) int32
	cublasGetVersion func(h uintptr, v *int32) int32
	cublasSetStream  func(h uintptr, stream uintptr) int32

	// setWorkspace is cublasSetWorkspace_v2 (cuBLAS 11+), nil when absent: graph mode sets
	// the handle's workspace with it, so that no GEMM allocates under stream capture.
	setWorkspace func(h uintptr, ws DevicePtr, bytes uint64) int32

	// gemmSBEx is cublasGemmStridedBatchedEx, called per GEMM through
	// purego.SyscallN (RegisterFunc's reflection costs microseconds).
	gemmSBEx uintptr
}

func (c *Cublas) symbols() map[string]any {
	return map[string]any{
		"cublasCreate_v2":     &c.cublasCreate,
		"cublasDestroy_v2":    &c.cublasDestroy,
		"cublasGetVersion_v2": &c.cublasGetVersion,
		"cublasSetStream_v2":  &c.cublasSetStream,
	}
}

// loadCublas opens cuBLASLt (optional: the first of ltPaths that loads,
// so that cuBLAS's own dependency resolves from the same folder) and then
// the first of paths that exports cublasCreate_v2.
func loadCublas(ltPaths, paths []string) (*Cublas, error) {
	c := &Cublas{}
	if lt, err := openFirst(ltPaths, "cublasLtCreate"); err == nil {
		c.lt, c.LtPath = lt, lt.path
	}
	lib, err := openFirst(paths, "cublasCreate_v2")
	if err != nil {
		c.lt.close()
		return nil, err
	}
	c.lib, c.Path = lib, lib.path
	if err := lib.bindAll(c.symbols()); err != nil {
		c.close()
		return nil, err
	}
	if c.gemmSBEx, err = lib.sym("cublasGemmStridedBatchedEx"); err != nil {
		c.close()
		return nil, err
	}
	if lib.bind("cublasSetWorkspace_v2", &c.setWorkspace) != nil {
		c.setWorkspace = nil // optional: graph mode says it is missing
	}
	return c, nil
}

func (c *Cublas) close() {
	c.lib.close()
	c.lt.close()
}

// rowMajorGemmArgs maps a row-major C (m, n) = op(A) (m, k) op(B) (k, n) to
// cuBLAS's column-major call C^T = op(B)^T op(A)^T: the operands swap, the
// dimensions become (n, m, k), and the leading dimensions are the row
// lengths of the row-major storage.
func rowMajorGemmArgs(transA, transB bool, m, n, k int) (opFirst, opSecond int32, lda, ldb, ldc int32) {
	opFirst, opSecond = cublasOpN, cublasOpN
	ldb, lda = int32(n), int32(k)
	if transB { // B stored (n, k)
		opFirst, ldb = cublasOpT, int32(k)
	}
	if transA { // A stored (k, m)
		opSecond, lda = cublasOpT, int32(m)
	}
	return opFirst, opSecond, lda, ldb, int32(n)
}
