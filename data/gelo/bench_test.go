package gelo

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo/mixing"
	"github.com/gelo-research/geloattack/engine/blas"
)

// benchSampler gives examples with exactly n rows of X at d = 4096: 4 positives of 3n/16 window
// tokens (n_clean = 3n/4) and n/4 gaussian shields, orthogonal mixing, every row observed.
func benchSampler(b *testing.B, c data.Corpus, n int) *Sampler {
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText, cfg.ShieldRows = Fixed(4), Fixed(float64(3*n/16)), n/4
	return newSampler(b, c, cfg)
}

var benchCorpusCache *data.MemCorpus

func benchCorpus(b *testing.B) *data.MemCorpus {
	if benchCorpusCache == nil {
		benchCorpusCache = testCorpus(b, 32, 192, 192, 4096, 1) // 32 texts x 192 rows x 4096: 100 MB
	}
	return benchCorpusCache
}

// cpuSeconds is the user+system CPU time of the process so far. On a shared machine wall time
// depends on the neighbours; CPU time per example is what the generator itself costs.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkExample times one example on one goroutine with a reused Workspace and
// single-threaded BLAS (so that cpu-ms/example counts no spinning BLAS threads), with A drawn by
// each path of mixPaths (the scalar Go QR, and LAPACK when present) side by side.
func BenchmarkExample(b *testing.B) {
	c := benchCorpus(b)
	blas.SetThreads(1)
	defer blas.SetThreads(0)
	for _, n := range []int{64, 256, 1024} {
		for _, p := range mixPaths(b) {
			b.Run(fmt.Sprintf("n=%d/%s", n, p.name), func(b *testing.B) {
				s := benchSampler(b, c, n)
				ws := new(Workspace)
				ws.mx.Lib = p.lib
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					ex, err := s.ExampleWith(ws, data.Train, int64(i))
					if err != nil || ex.N != n {
						b.Fatal(ex.N, err)
					}
				}
				cpu := cpuSeconds() - cpu0
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/sec, "examples/s")
				b.ReportMetric(float64(b.N*n)/sec, "rows/s")
				b.ReportMetric(1000*cpu/float64(b.N), "cpu-ms/example")
			})
		}
	}
}

// BenchmarkPipeline times the consumer's view in steady state: batches of 8 from the prefetching
// pipeline (prefetch 2), timed from the first batch on; an op is one example. Use -benchtime of
// at least 64x: up to prefetch batches generated past the end are counted in cpu-ms/example.
// blas=1 sets OpenBLAS to one thread per call (the workers are the parallelism); blas=default
// keeps engine/blas's default (GOMAXPROCS threads per call).
func BenchmarkPipeline(b *testing.B) {
	c := benchCorpus(b)
	b.Logf("BLAS: %s", blas.Name())
	defer blas.SetThreads(0)
	for _, n := range []int{64, 256, 1024} {
		for _, workers := range []int{1, 2} {
			for _, threads := range []int{1, 0} {
				name := fmt.Sprintf("n=%d/workers=%d/blas=%d", n, workers, threads)
				if threads == 0 {
					name = fmt.Sprintf("n=%d/workers=%d/blas=default", n, workers)
				}
				b.Run(name, func(b *testing.B) {
					blas.SetThreads(threads)
					s := benchSampler(b, c, n)
					p := NewPipeline(context.Background(), s, data.Train, 8, workers, 2, 0)
					defer p.Close()
					if _, err := p.Next(); err != nil { // warm: workers running, buffers grown
						b.Fatal(err)
					}
					b.ResetTimer()
					start, cpu0 := time.Now(), cpuSeconds()
					got := 0
					for got < b.N {
						batch, err := p.Next()
						if err != nil {
							b.Fatal(err)
						}
						got += batch.B
					}
					sec, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
					b.ReportMetric(float64(got)/sec, "examples/s")
					b.ReportMetric(1000*cpu/float64(got), "cpu-ms/example")
					b.ReportMetric(float64(got*n)/sec, "rows/s")
				})
			}
		}
	}
}

// BenchmarkHaar times one Haar draw (float64 Householder QR, Q formed, sign fix) on each path of
// mixPaths, BLAS single-threaded.
func BenchmarkHaar(b *testing.B) {
	blas.SetThreads(1)
	defer blas.SetThreads(0)
	for _, n := range []int{64, 256, 1024} {
		for _, p := range mixPaths(b) {
			b.Run(fmt.Sprintf("n=%d/%s", n, p.name), func(b *testing.B) {
				mx := mixing.Mixer{Lib: p.lib}
				rng := stream(0, data.Train, 0, stageMix)
				a := make([]float32, n*n)
				cpu0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					mx.Orthogonal(rng, n, a)
				}
				cpu := cpuSeconds() - cpu0
				b.ReportMetric(1000*cpu/float64(b.N), "cpu-ms/op")
				b.ReportMetric(8.0/3*float64(n*n*n)/cpu*float64(b.N)/1e9, "GFLOPS")
			})
		}
	}
}
