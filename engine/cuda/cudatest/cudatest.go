// Package cudatest opens the CUDA backend for tests of the packages that run on it.
package cudatest

import (
	"errors"
	"math"
	"testing"

	"github.com/gelo-research/geloattack/engine/cuda"
)

// Open opens the GPU backend at precision, closed when t ends, or skips t without a GPU.
func Open(t *testing.T, precision string) *cuda.Backend {
	t.Helper()
	return OpenWith(t, cuda.BackendOptions{Precision: precision})
}

// OpenWith is Open with every backend option (graph mode, fused attention, ...).
func OpenWith(t *testing.T, opts cuda.BackendOptions) *cuda.Backend {
	t.Helper()
	be, err := cuda.NewBackend(opts)
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

// RelL2 is ||got - want|| / ||want||, in float64: how far a device's tensor is from the CPU's.
func RelL2(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / max(n, 1e-300))
}
