package train

import (
	"errors"
	"testing"

	"github.com/gelo-research/geloattack/engine/cuda"
)

// TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA is the bucket test on a GPU, in fp32 and in
// bf16 (whose operand copies are sized by the GEMMs, so by the set size): the tape's arena and
// gradient pool, and all the device memory the backend holds, stop growing once each bucket has
// been seen. Skips without a GPU.
func TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA(t *testing.T) {
	fp32 := openCUDA(t, cuda.PrecisionFP32) // skips without a GPU
	for _, precision := range []string{cuda.PrecisionFP32, cuda.PrecisionBF16} {
		t.Run(precision, func(t *testing.T) {
			be := fp32
			if precision != cuda.PrecisionFP32 {
				be = openCUDA(t, precision)
			}
			checkMemoryStopsGrowing(t, be, be.PeakBytes)
			if err := be.Sync(); err != nil {
				t.Fatalf("device error: %v", err)
			}
		})
	}
}

// openCUDA opens the GPU backend at precision, closed when t ends, or skips t without a GPU.
func openCUDA(t *testing.T, precision string) *cuda.Backend {
	t.Helper()
	be, err := cuda.NewBackend(cuda.BackendOptions{Precision: precision})
	if errors.Is(err, cuda.ErrNoDevice) {
		t.Skipf("GPU check not run: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("close the GPU backend: %v", err)
		}
	})
	return be
}
