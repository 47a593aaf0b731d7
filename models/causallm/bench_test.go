package causallm

import (
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
)

// BenchmarkStep is one forward and backward of configs/lm/small.yaml's decoder (32k vocabulary,
// 6 blocks of 384, sequences of 128) on 16 windows; tokens/s is the training throughput without
// the optimizer (see `geloattack bench -what lm` for whole steps beside PyTorch).
func BenchmarkStep(b *testing.B) {
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	cfg := lmcfg.DefaultModel()
	const B, V = 16, 32000
	m, err := New(be, cfg, V, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	win := make([]int32, B*(cfg.Seq+1))
	for i := range win {
		win[i] = int32(r.IntN(V))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.ForwardBackward(win, B); err != nil {
			b.Fatal(err)
		}
		m.Params().ZeroGrad()
	}
	b.ReportMetric(float64(B*cfg.Seq)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
