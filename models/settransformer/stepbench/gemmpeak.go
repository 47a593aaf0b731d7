package stepbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/benchkit"
)

// gemmPeakRuns is how many times each peak product runs; the fastest run counts, so that a run
// slowed by another process on a shared machine does not lower the peak.
const gemmPeakRuns = 5

// gemmSquare is the largest side of the square product the peak is also measured on: large
// enough for BLAS's blocking to reach its best (2·2048³ = 17 GFLOP, about 0.1 s on two AVX2
// cores), the library's best case whatever the step's shapes.
const gemmSquare = 2048

// PeakProduct is one product the GEMM peak is measured on, C (M, N) = A (M, K) Bᵀ with B stored
// (N, K) as a Linear weight, and the best FLOP/s the backend's Gemm reached on it.
type PeakProduct struct {
	Name    string  // what the shape is: "square" or the step's own
	M, N, K int     // the product's shape
	FLOPS   float64 // best of gemmPeakRuns: 2·M·N·K / fastest wall time
	// CPUFLOPS is the best of 2·M·N·K / (process CPU time of a run / workers): the rate the
	// workers reach in the CPU time they get, which other processes on the machine lower less.
	CPUFLOPS float64
}

// peakProducts are the products the peak of a step is measured on: a square one, its side the
// power of two at or below the step's rows up to gemmSquare (small presets stay quick to test),
// and the step's dominant shape, the SwiGLU gate/up projection of all rows (rows, mlp, h), which
// carries half of a layer's GEMM FLOPs.
func peakProducts(rows, mlp, h int) []PeakProduct {
	side := gemmSquare
	for side > 1 && side > rows {
		side /= 2
	}
	return []PeakProduct{
		{Name: "square", M: side, N: side, K: side},
		{Name: "step's gate/up", M: rows, N: mlp, K: h},
	}
}

// measureGemmPeak runs each product gemmPeakRuns times through be.Gemm (on the CPU: the same
// workers, tiling and single-threaded BLAS calls as the step's GEMMs), fills in its FLOPS and
// returns the best over all of them, by wall time and by CPU time over workers: the GEMM peak a
// step on be can be held against.
func measureGemmPeak(ctx context.Context, be engine.Backend, products []PeakProduct, workers int) (best, bestCPU float64, err error) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range products {
		p := &products[i]
		a, err := randomBuffer(be, rng, "gemm peak A", p.M, p.K)
		if err != nil {
			return 0, 0, err
		}
		b, err := randomBuffer(be, rng, "gemm peak B", p.N, p.K)
		if err != nil {
			return 0, 0, err
		}
		c, err := engine.NewBuffer(be, "gemm peak C", p.M, p.N)
		if err != nil {
			return 0, 0, fmt.Errorf("settransformer: gemm peak: %w", err)
		}
		flop := 2 * float64(p.M) * float64(p.N) * float64(p.K)
		for r := 0; r < gemmPeakRuns; r++ {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			t0, cpu0 := time.Now(), benchkit.ProcessCPUTime()
			be.Gemm(false, true, 1, p.M, p.N, p.K, 1, a, b, 0, c) // C (M, N) = A (M, K) Bᵀ
			if err := engine.Sync(be); err != nil {
				return 0, 0, fmt.Errorf("settransformer: gemm peak (%d, %d, %d): %w", p.M, p.N, p.K, err)
			}
			wall, cpu := time.Since(t0), benchkit.ProcessCPUTime()-cpu0
			p.FLOPS = max(p.FLOPS, flop/max(wall.Seconds(), 1e-9))
			if cpu > 0 {
				p.CPUFLOPS = max(p.CPUFLOPS, flop/(cpu.Seconds()/float64(workers)))
			}
		}
		best, bestCPU = max(best, p.FLOPS), max(bestCPU, p.CPUFLOPS)
	}
	return best, bestCPU, nil
}

// randomBuffer is a (rows, cols) buffer on be of uniform values in [-1, 1) (no zeros or
// subnormals that a kernel might take a faster or slower path on).
func randomBuffer(be engine.Backend, rng *rand.Rand, name string, rows, cols int) (*engine.Tensor, error) {
	t, err := engine.NewBuffer(be, name, rows, cols)
	if err != nil {
		return nil, fmt.Errorf("settransformer: gemm peak: %w", err)
	}
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = 2*rng.Float32() - 1
	}
	if err := t.CopyFrom(v); err != nil {
		return nil, fmt.Errorf("settransformer: gemm peak: %w", err)
	}
	return t, nil
}
