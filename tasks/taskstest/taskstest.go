// Package taskstest holds the small store, sampler, model and loss that the tests of the tasks and
// of the training loop share, so both run the same unmix task (tasks.NewUnmix of these).
package taskstest

import (
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/losses/ot"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// UnmixD is the row width of UnmixCorpus.
const UnmixD = 16

// UnmixCorpus is texts texts of 10 to 14 Gaussian rows of width UnmixD around a common offset
// (so that centring matters), with text ids from 500.
func UnmixCorpus(t testing.TB, texts int) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	c := data.NewMemCorpus(UnmixD, 1)
	offset := make([]float32, UnmixD)
	for j := range offset {
		offset[j] = float32(2 * rng.NormFloat64())
	}
	for i := 0; i < texts; i++ {
		rows := make([]float32, (10+rng.IntN(5))*UnmixD)
		for j := range rows {
			rows[j] = offset[j%UnmixD] + float32(rng.NormFloat64())
		}
		if err := c.Add(int64(500+i), rows, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// UnmixSampler gives sets of 2 positives x 4 window rows plus 2 gaussian shields (n = 10), 30% of
// the texts in the validation split, centred when center is set.
func UnmixSampler(t testing.TB, c data.Corpus, center bool) *gelo.Sampler {
	t.Helper()
	cfg := gelo.DefaultConfig()
	cfg.Seed, cfg.ValFrac, cfg.Center = 3, 0.3, center
	cfg.Positives, cfg.TokensPerText, cfg.ShieldRows = gelo.Fixed(2), gelo.Fixed(4), 2
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// UnmixModel is a small unmix model for UnmixCorpus: h 32, 2 encoder layers, 1 decoder layer and
// 8 slots (= n_clean of UnmixSampler).
func UnmixModel() settransformer.Config {
	return settransformer.Config{InputDim: UnmixD, Hidden: 32, Layers: 2, Heads: 4, MLPHidden: 64,
		Eps: settransformer.DefaultEps, Task: settransformer.TaskUnmix, DecLayers: 1, Slots: 8,
		Temperature: settransformer.DefaultTemperature}
}

// UnmixLoss is the default (balanced) unmix loss with 20 Sinkhorn iterations.
func UnmixLoss() ot.Config {
	loss := ot.DefaultConfig()
	loss.Iters = 20
	return loss
}

// CPU is a CPU backend closed when the test ends.
func CPU(t testing.TB) engine.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}
