package causallm

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
)

// BenchmarkTrainStep is one whole training step of configs/lm/small.yaml's decoder (32k
// vocabulary, 6 blocks of 384, 6 heads, MLP 1024, sequences of 128) on 16 windows: forward,
// backward, gradient clipping and AdamW, as train.TrainLM runs it. bench/lm-vs-torch.sh runs it
// beside bench/torch_lm.py --bench (the same step in PyTorch). GELOATTACK_BENCH_BATCH overrides
// the 16 windows.
func BenchmarkTrainStep(b *testing.B) {
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	cfg := lmcfg.DefaultModel()
	B, V := 16, 32000
	if s := os.Getenv("GELOATTACK_BENCH_BATCH"); s != "" {
		if B, err = strconv.Atoi(s); err != nil || B < 1 {
			b.Fatalf("GELOATTACK_BENCH_BATCH=%q: want a positive integer", s)
		}
	}
	m, err := New(be, cfg, V, 1)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := engine.NewAdamW(m.Params(), engine.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	win := make([]int32, B*(cfg.Seq+1))
	for i := range win {
		win[i] = int32(r.IntN(V))
	}
	step := func() {
		if _, err := m.ForwardBackward(win, B); err != nil {
			b.Fatal(err)
		}
		engine.ClipGradNorm(m.Params(), 1)
		opt.Step()
		m.Params().ZeroGrad()
	}
	step() // the first step sizes the tape's arena and gradient pool
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64(B*cfg.Seq)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
