package stepbench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/benchkit"
	st "github.com/gelo-research/geloattack/models/settransformer"
)

// BenchmarkAttentionKernels times the paper retrieval step (forward, backward, clipping, AdamW)
// with attention's per-head products on BLAS and on the CPU's register-block kernels, in
// alternate steps of one process, and reports each one's median process CPU time a step and its
// share of the GEMM limit by CPU time (against the sgemm peak measured after the steps, as
// `bench -what step` does). On a shared machine CPU time drifts with the neighbours' load by
// more than the difference; alternating pairs the two under the same load:
// go test ./models/settransformer/stepbench -run '^$' -bench AttentionKernels -benchtime 3x.
func BenchmarkAttentionKernels(b *testing.B) {
	ctx := context.Background()
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	m, err := newBenchModel(be, st.TaskRetrieval, "paper", benchShapes["paper"])
	if err != nil {
		b.Fatal(err)
	}
	opt, err := engine.NewAdamW(m.params, engine.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	step := func() (cpuTime time.Duration, flops int64) {
		f0, t0 := be.GemmFLOPs(), benchkit.ProcessCPUTime()
		m.params.ZeroGrad()
		if err := m.fwdBwd(); err != nil {
			b.Fatal(err)
		}
		engine.ClipGradNorm(m.params, 1)
		opt.Step()
		return benchkit.ProcessCPUTime() - t0, be.GemmFLOPs() - f0
	}
	step() // warm-up: the arena and gradient pool grow here

	var times [2][]time.Duration // BLAS, tiled
	var flops int64
	for b.Loop() {
		for i, blasAttn := range []bool{true, false} {
			be.SetBLASAttention(blasAttn)
			d, f := step()
			times[i] = append(times[i], d)
			flops = f
		}
	}
	be.SetBLASAttention(false)
	_, peakCPU, err := measureGemmPeak(ctx, be, m.peak, be.Workers())
	if err != nil {
		b.Fatal(err)
	}
	for i, name := range []string{"blas", "tiled"} {
		slices.Sort(times[i])
		sec := times[i][len(times[i])/2].Seconds()
		b.ReportMetric(sec, name+"-cpu-s/step")
		// GFLOP per CPU-second per worker against the peak's, as Result.GemmFractionCPU.
		b.ReportMetric(float64(flops)/(sec/float64(be.Workers()))/peakCPU, name+"-share-cpu")
	}
	b.ReportMetric(peakCPU/1e9, "peak-GFLOP/cpu-s")
	b.ReportMetric(0, "ns/op")
}
