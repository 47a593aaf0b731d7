package train

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/losses/ot"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks"
)

// The unmix fixtures below mirror package tasks' test fixtures: the loop's tests run a real task.

const unmixTestD = 16

// unmixTestCorpus is texts texts of 10 to 14 Gaussian rows of width 16 around a common offset
// (so that centring matters).
func unmixTestCorpus(t testing.TB, texts int) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	c := data.NewMemCorpus(unmixTestD, 1)
	offset := make([]float32, unmixTestD)
	for j := range offset {
		offset[j] = float32(2 * rng.NormFloat64())
	}
	for i := 0; i < texts; i++ {
		rows := make([]float32, (10+rng.IntN(5))*unmixTestD)
		for j := range rows {
			rows[j] = offset[j%unmixTestD] + float32(rng.NormFloat64())
		}
		if err := c.Add(int64(500+i), rows, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// unmixTestSampler gives sets of 2 positives x 4 window rows plus 2 gaussian shields (n = 10).
func unmixTestSampler(t testing.TB, c data.Corpus, center bool) *gelo.Sampler {
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

// unmixTestTask is a small unmix model with 8 slots (= n_clean) under a 20-iteration balanced loss.
func unmixTestTask(t testing.TB, s *gelo.Sampler, ev tasks.UnmixEvalConfig) *tasks.Unmix {
	t.Helper()
	cfg := settransformer.Config{InputDim: unmixTestD, Hidden: 32, Layers: 2, Heads: 4, MLPHidden: 64,
		Eps: settransformer.DefaultEps, Task: settransformer.TaskUnmix, DecLayers: 1, Slots: 8,
		Temperature: settransformer.DefaultTemperature}
	loss := ot.DefaultConfig()
	loss.Iters = 20
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	task, err := tasks.NewUnmix(be, cfg, loss, s, ev, 9)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestUnmixInTrainLoop: the unmix task runs in the trainer end to end (steps, evaluation on both
// splits, checkpoint) and its final evaluation carries the unmix metrics.
func TestUnmixInTrainLoop(t *testing.T) {
	s := unmixTestSampler(t, unmixTestCorpus(t, 30), false)
	task := unmixTestTask(t, s, tasks.UnmixEvalConfig{PoolRows: 200})
	o := DefaultOptions()
	o.Steps, o.BatchSize, o.WarmupSteps, o.LogEvery, o.EvalEvery, o.EvalBatches, o.CkptEvery = 3, 2, 1, 1, 3, 1, 3
	res, err := Train(context.Background(), Run{Dir: t.TempDir(), Options: o, Task: task, Sampler: s, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []string{"train", "val"} {
		m := res.Final[split]
		if _, ok := m["unmix_mass"]; !ok {
			t.Errorf("%s: final metrics %v lack unmix_mass", split, m)
		}
	}
}
