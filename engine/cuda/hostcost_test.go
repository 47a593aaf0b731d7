package cuda

import (
	"os"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
)

// TestHostCostPerCall measures, when GELOATTACK_GPU_HOSTCOST is set, how
// long the host takes to queue one kernel launch and one cuBLAS GEMM (the
// paper preset's (4112, 384, 384) product) without waiting for the GPU:
// what bounds a step made of thousands of small calls.
func TestHostCostPerCall(t *testing.T) {
	if os.Getenv("GELOATTACK_GPU_HOSTCOST") == "" {
		t.Skip("set GELOATTACK_GPU_HOSTCOST=1 to measure host time per device call")
	}
	for _, prec := range []string{PrecisionFP32, PrecisionBF16} {
		be := newTestBackend(t, prec)
		tp := engine.NewTape(be)
		m, n, k := 4112, 384, 384
		a := tp.Input(make([]float32, m*k), m, k)
		w := tp.Input(make([]float32, n*k), n, k)
		c := tp.Input(make([]float32, m*n), m, n)
		y := tp.Input(make([]float32, 1), 1)
		measure := func(what string, calls int, f func()) {
			f()
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for range calls {
				f()
			}
			host := time.Since(t0)
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %.2f us host time per call (%.2f us with the GPU's work)", prec, what,
				host.Seconds()/float64(calls)*1e6, time.Since(t0).Seconds()/float64(calls)*1e6)
		}
		measure("tiny kernel launch", 2000, func() { be.Axpy(y, 1, y) })
		measure("gemm (4112,384,384)", 500, func() { be.Gemm(false, true, 1, m, n, k, 1, a, w, 0, c) })
	}
}
