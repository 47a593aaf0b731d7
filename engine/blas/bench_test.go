package blas

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
)

// cpuSeconds is the user+system CPU time this process has used: on a
// machine shared with other work, GFLOP per CPU-second shows what the
// library does with the time it gets.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func report(b *testing.B, flop, cpu0 float64) {
	total := flop * float64(b.N) / 1e9
	b.ReportMetric(total/b.Elapsed().Seconds(), "GFLOP/s")
	if cpu := cpuSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(total/cpu, "GFLOP/cpu-s")
	}
}

// BenchmarkSgemm measures GFLOP/s of OpenBLAS at the shapes the paper-size
// model uses: the input projection (4096 rows, 4096 -> 384), the attention and
// MLP projections, and one attention head's QK^T (256 x 256 x 32).
// "split2" runs the product as two row halves on two goroutines with
// OpenBLAS at one thread, the way the engine's CPU backend calls it.
func BenchmarkSgemm(b *testing.B) {
	lib, err := OpenOpenBLAS()
	if err != nil {
		b.Skip(err)
	}
	shapes := []struct{ m, n, k int }{
		{4096, 384, 4096}, {4096, 384, 384}, {4096, 1536, 384}, {4096, 384, 1536}, {256, 256, 32}, {256, 32, 256},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range shapes {
		a := randSlice(r, s.m*s.k)
		bm := randSlice(r, s.k*s.n)
		c := make([]float32, s.m*s.n)
		flop := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		for _, thr := range []int{1, 2} {
			b.Run(fmt.Sprintf("%dx%dx%d/threads%d", s.m, s.n, s.k, thr), func(b *testing.B) {
				lib.SetThreads(thr)
				cpu0 := cpuSeconds()
				for b.Loop() {
					lib.Sgemm(false, false, s.m, s.n, s.k, 1, a, s.k, bm, s.n, 0, c, s.n)
				}
				report(b, flop, cpu0)
			})
		}
		b.Run(fmt.Sprintf("%dx%dx%d/split2", s.m, s.n, s.k), func(b *testing.B) {
			lib.SetThreads(1)
			h := s.m / 2
			cpu0 := cpuSeconds()
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range 2 {
					wg.Go(func() {
						lib.Sgemm(false, false, h, s.n, s.k, 1, a[w*h*s.k:], s.k, bm, s.n, 0, c[w*h*s.n:], s.n)
					})
				}
				wg.Wait()
			}
			report(b, flop, cpu0)
		})
	}
}
