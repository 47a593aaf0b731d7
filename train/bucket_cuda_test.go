package train

import (
	"testing"

	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
)

// TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA is the bucket test on a GPU, in fp32 and in
// bf16 (whose operand copies are sized by the GEMMs, so by the set size): the tape's arena and
// gradient pool, and all the device memory the backend holds, stop growing once each bucket has
// been seen. Skips without a GPU.
func TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA(t *testing.T) {
	fp32 := cudatest.Open(t, cuda.PrecisionFP32) // skips without a GPU
	for _, precision := range []string{cuda.PrecisionFP32, cuda.PrecisionBF16} {
		t.Run(precision, func(t *testing.T) {
			be := fp32
			if precision != cuda.PrecisionFP32 {
				be = cudatest.Open(t, precision)
			}
			checkMemoryStopsGrowing(t, be, be.PeakBytes)
			if err := be.Sync(); err != nil {
				t.Fatalf("device error: %v", err)
			}
		})
	}
}
