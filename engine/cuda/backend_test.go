package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// newTestBackend opens the CUDA backend with the given GEMM precision, or
// skips the test when there is no usable GPU (no driver, no device: what
// happens on machines without one and in CI).
func newTestBackend(t *testing.T, precision string) *Backend {
	t.Helper()
	return openTestBackend(t, BackendOptions{Precision: precision})
}

// openTestBackend is newTestBackend with all options.
func openTestBackend(t *testing.T, opts BackendOptions) *Backend {
	t.Helper()
	precision := opts.Precision
	b, err := NewBackend(opts)
	if err != nil {
		if errors.Is(err, ErrNoDevice) {
			msg := err.Error()
			if !strings.HasPrefix(msg, "no CUDA device") {
				msg = "no CUDA device: " + msg
			}
			t.Skip(msg)
		}
		t.Fatalf("NewBackend(precision %q): %v", precision, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// crossCheckCUDA checks every engine.Backend method of the CUDA backend at
// one precision against the CPU backend (see crosscheck_test.go for the
// cases and the error metric).
func crossCheckCUDA(t *testing.T, precision string, tol tolerances) {
	crossCheckCUDAWith(t, BackendOptions{Precision: precision}, tol)
}

// crossCheckCUDAWith is crossCheckCUDA with all backend options.
func crossCheckCUDAWith(t *testing.T, opts BackendOptions, tol tolerances) {
	precision := opts.Precision
	dut := openTestBackend(t, opts)
	if got := dut.Precision(); got != precision {
		t.Errorf("Precision() = %q, want %q", got, precision)
	}
	ref, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	checkBackendOps(t, ref, dut, tol)
	if err := dut.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if err := dut.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
}

// TestBackendCrossCheckFP32: every op within 1e-4 of the CPU.
func TestBackendCrossCheckFP32(t *testing.T) { crossCheckCUDA(t, PrecisionFP32, fp32Tol) }

// TestBackendCrossCheckTF32: GEMM-based ops within 1e-2, the rest 1e-4.
func TestBackendCrossCheckTF32(t *testing.T) { crossCheckCUDA(t, PrecisionTF32, tf32Tol) }

// TestBackendCrossCheckBF16: GEMM-based ops within 2e-2, the rest 1e-4.
func TestBackendCrossCheckBF16(t *testing.T) { crossCheckCUDA(t, PrecisionBF16, bf16Tol) }

// TestBackendCrossCheckFusedAttention: the fused attention kernels
// (flash.cu, heads up to 32 wide; wider heads take the cuBLAS path) agree
// with the CPU within 1e-4 like every other op.
func TestBackendCrossCheckFusedAttention(t *testing.T) {
	crossCheckCUDAWith(t, BackendOptions{Precision: PrecisionFP32, FusedAttention: true}, fp32Tol)
}

// TestBackendDeterminism: attention forward and backward, the reductions
// and the row-summing kernels give bit-identical results run to run.
func TestBackendDeterminism(t *testing.T) {
	fp32 := newTestBackend(t, PrecisionFP32) // skips without a GPU
	t.Run(PrecisionFP32, func(t *testing.T) { checkDeterminism(t, fp32) })
	t.Run(PrecisionBF16, func(t *testing.T) { checkDeterminism(t, newTestBackend(t, PrecisionBF16)) })
	t.Run("fused-attention", func(t *testing.T) {
		checkDeterminism(t, openTestBackend(t, BackendOptions{Precision: PrecisionFP32, FusedAttention: true}))
	})
}

// TestBackendPrecisionEffect checks that the precision option reaches the
// GEMMs: a 385x384x384 product in tf32 or bf16 must differ from fp32 (else
// the option is ignored), and bf16 (8 significant bits) must be clearly
// less accurate than tf32 (11): cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF on
// fp32 operands once gave tf32's very results, which this catches. On an
// H100: fp32 8.7e-7, tf32 3.0e-4, bf16 2.3e-3 relative to the CPU.
func TestBackendPrecisionEffect(t *testing.T) {
	backends := map[string]*Backend{}
	for _, p := range []string{PrecisionFP32, PrecisionTF32, PrecisionBF16} {
		backends[p] = newTestBackend(t, p) // skips without a GPU
	}
	const m, n, k = 385, 384, 384
	rng := rand.New(rand.NewPCG(3, 4))
	a, bm := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range bm {
		bm[i] = float32(rng.NormFloat64())
	}
	gemm := func(be engine.Backend) []float32 {
		tp := engine.NewTape(be)
		c := tp.Input(make([]float32, m*n), m, n)
		be.Gemm(false, false, 1, m, n, k, 1, tp.Input(a, m, k), tp.Input(bm, k, n), 0, c)
		if err := engine.Sync(be); err != nil {
			t.Fatal(err)
		}
		return c.ToHost()
	}
	ref, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := gemm(ref)
	got := map[string][]float32{}
	rel := map[string]float64{}
	for _, p := range []string{PrecisionFP32, PrecisionTF32, PrecisionBF16} {
		got[p] = gemm(backends[p])
		var worst, scale float64
		for i, w := range want {
			worst = max(worst, math.Abs(float64(got[p][i]-w)))
			scale = max(scale, math.Abs(float64(w)))
		}
		rel[p] = worst / scale
		t.Logf("%s: relative error %.3g against the CPU", p, worst/scale)
	}
	for _, p := range []string{PrecisionTF32, PrecisionBF16} {
		if slices.Equal(got[p], got[PrecisionFP32]) {
			t.Errorf("%s GEMM is bit-identical to fp32: the precision is not applied", p)
		}
	}
	if rel[PrecisionBF16] < 3*rel[PrecisionTF32] {
		t.Errorf("bf16 relative error %.3g is not well above tf32's %.3g: are the inputs really rounded to bf16?",
			rel[PrecisionBF16], rel[PrecisionTF32])
	}
}

// TestBackendStagedUpload: an upload larger than the staging buffers (three
// chunks through the two page-locked halves, the last one partial) arrives
// bit-exact, and a second upload into the same tensor replaces it.
func TestBackendStagedUpload(t *testing.T) {
	be := newTestBackend(t, PrecisionFP32)
	n := 2*stageChunk + 12345
	src := make([]float32, n)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	tp := engine.NewTape(be)
	x := tp.Input(src, n)
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	if got := x.ToHost(); !slices.Equal(got, src) {
		t.Fatal("staged upload changed the data")
	}
	for i := range src {
		src[i] = -src[i]
	}
	be.Upload(x, src)
	want0 := src[0]
	src[0] = 42 // Upload has returned: the caller may reuse its slice
	got := x.ToHost()
	if got[0] != want0 || !slices.Equal(got[1:], src[1:]) {
		t.Fatal("second staged upload did not replace the data")
	}
	if be.stage == nil {
		t.Error("the upload did not take the staged path")
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFromPythonWheels: cuBLAS from pip's CUDA wheels (site-packages/
// nvidia/*/lib of the Python environments SearchDirs knows, the python3 on
// PATH included) opens and serves a GEMM. Skips where no wheel is installed.
func TestOpenFromPythonWheels(t *testing.T) {
	var wheels []string
	for _, p := range Candidates(CublasNames, pythonNvidiaDirs()) {
		if _, err := os.Stat(p); err == nil {
			wheels = append(wheels, p)
		}
	}
	if len(wheels) == 0 {
		t.Skip("no cuBLAS from pip wheels found")
	}
	be, err := NewBackend(BackendOptions{Device: Options{CublasPaths: wheels}})
	if errors.Is(err, ErrNoDevice) && strings.Contains(err.Error(), "driver") {
		t.Skipf("no CUDA driver: %v", err)
	}
	if err != nil {
		t.Fatalf("cuBLAS wheels %v: %v", wheels, err)
	}
	defer be.Close()
	if !strings.Contains(be.Device().Blas.Path, "site-packages") {
		t.Errorf("loaded %s, want a wheel's copy", be.Device().Blas.Path)
	}
	tp := engine.NewTape(be)
	a := tp.Input([]float32{1, 2, 3, 4}, 2, 2)
	c := tp.Input(make([]float32, 4), 2, 2)
	be.Gemm(false, false, 1, 2, 2, 2, 1, a, a, 0, c)
	if got, want := c.ToHost(), []float32{7, 10, 15, 22}; !slices.Equal(got, want) {
		t.Errorf("A*A = %v, want %v", got, want)
	}
	t.Logf("opened %s", be.Name())
}
