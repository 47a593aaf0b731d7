package tasks

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// unmixTestTask is a small unmix model with 8 slots (= n_clean) under a 20-iteration balanced loss.
func unmixTestTask(t testing.TB, s *gelo.Sampler, ev UnmixEvalConfig) *Unmix {
	t.Helper()
	task, err := NewUnmix(taskstest.CPU(t), taskstest.UnmixModel(), taskstest.UnmixLoss(), s, ev, 9)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// unmixTestBatch is batch index of split, drawn directly from the sampler.
func unmixTestBatch(t testing.TB, s *gelo.Sampler, split data.Split, index int64, size int) *gelo.Batch {
	t.Helper()
	var exs []*gelo.Example
	for i := 0; i < size; i++ {
		ex, err := s.Example(split, index*int64(size)+int64(i))
		if err != nil {
			t.Fatal(err)
		}
		exs = append(exs, ex)
	}
	b, err := gelo.NewBatch(index, exs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnmixStepsReduceLoss: AdamW steps on one fixed batch drive the unmix loss well down, every
// term is reported and finite, and the gradients stay finite.
func TestUnmixStepsReduceLoss(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), false)
	task := unmixTestTask(t, s, UnmixEvalConfig{})
	opt, err := engine.NewAdamW(task.Params(), engine.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	b := unmixTestBatch(t, s, data.Train, 0, 4)
	var losses []float64
	for step := 0; step < 40; step++ {
		l, err := task.Step(b, int64(step))
		if err != nil {
			t.Fatal(err)
		}
		if err := engine.CheckFinite(task.Params()); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step == 0 {
			for _, k := range []string{"unmix", "unmix_cyc", "unmix_ot", "unmix_a_reg", "unmix_norm"} {
				v, ok := task.LastParts()[k]
				if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("loss term %s = %v (present %v)", k, v, ok)
				}
			}
			if v := task.LastParts()["unmix"]; math.Abs(v-l) > 1e-6*math.Abs(l) {
				t.Errorf("Step returned %v, the parts' total is %v", l, v)
			}
		}
		engine.ClipGradNorm(task.Params(), 1)
		opt.Step()
		losses = append(losses, l)
	}
	first, last := losses[0], losses[len(losses)-1]
	t.Logf("unmix loss %.4f -> %.4f over %d steps; last terms %v", first, last, len(losses), task.LastParts())
	if !(last < 0.6*first) {
		t.Errorf("loss went from %v to %v, want below 60%% of the start: %v", first, last, losses)
	}
}

// TestUnmixEvaluator: the evaluator reports every SPEC §6 key, finite, with the chance level
// 1/K of a pool of Gaussian rows (no distractor duplicates a target), for K = 16 and K = 8.
func TestUnmixEvaluator(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), false)
	for _, k := range []int{0, 8} {
		task := unmixTestTask(t, s, UnmixEvalConfig{K: k, PoolRows: 200})
		ev := task.NewEvaluator()
		for i := int64(0); i < 2; i++ {
			if err := ev.Add(unmixTestBatch(t, s, data.Val, i, 3)); err != nil {
				t.Fatal(err)
			}
		}
		m := ev.Metrics()
		for _, key := range []string{"unmix_mass", "unmix_mass_chance", "unmix_mass_se", "cos_mean", "cos_p95",
			"random_cos_mean", "random_cos_p95", "random_mass"} {
			v, ok := m[key]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("K=%d: metric %s = %v (present %v)", k, key, v, ok)
			}
		}
		wantK := k
		if wantK == 0 {
			wantK = 16
		}
		if c := m["unmix_mass_chance"]; math.Abs(c-1/float64(wantK)) > 1e-12 {
			t.Errorf("K=%d: chance %v, want 1/%d", k, c, wantK)
		}
		if c := m["random_mass_chance"]; math.Abs(c-1/float64(wantK)) > 1e-12 {
			t.Errorf("K=%d: random rows' chance %v, want 1/%d", k, c, wantK)
		}
		for _, key := range []string{"cos_mean", "cos_p95", "random_cos_mean", "random_cos_p95"} {
			if v := m[key]; v < -1 || v > 1 {
				t.Errorf("K=%d: %s = %v, outside [-1, 1]", k, key, v)
			}
		}
		t.Logf("K=%d: %v", wantK, m)
	}
}

// TestUnmixScoreOracle: a prediction that is the clean rows themselves (plus surplus slots) scores
// mass near 1 and cosine 1, while random rows of other texts score near chance; with centring on,
// the prediction is compared with centred distractors.
func TestUnmixScoreOracle(t *testing.T) {
	c := taskstest.UnmixCorpus(t, 30)
	for _, center := range []bool{false, true} {
		s := taskstest.UnmixSampler(t, c, center)
		task := unmixTestTask(t, s, UnmixEvalConfig{PoolRows: 200})
		ex, err := s.Example(data.Val, 5)
		if err != nil {
			t.Fatal(err)
		}
		const S = 10 // two slots more than the clean rows
		pred := make([]float32, S*ex.D)
		copy(pred, ex.H)
		rng := rand.New(rand.NewPCG(1, 1))
		for i := len(ex.H); i < len(pred); i++ {
			pred[i] = float32(rng.NormFloat64())
		}
		rep, err := task.score(ex, pred, S)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Model.Pairs) != ex.NClean {
			t.Errorf("center=%v: %d matched pairs, want n_clean = %d", center, len(rep.Model.Pairs), ex.NClean)
		}
		if rep.Model.CosMean < 1-1e-9 {
			t.Errorf("center=%v: exact prediction has matched cosine %v, want 1", center, rep.Model.CosMean)
		}
		if rep.Random == nil || rep.Random.Mass > 0.5 || rep.Model.Mass < 2*rep.Random.Mass {
			t.Errorf("center=%v: random rows scored %+v against the exact prediction's %v", center, rep.Random, rep.Model.Mass)
		}
		// Uncentred rows share the corpus offset, so every distractor has cosine ~0.9 with the
		// target and cos/tau separates them only partly; centred rows are nearly orthogonal.
		if wantMass := map[bool]float64{false: 0.5, true: 0.99}[center]; rep.Model.Mass < wantMass {
			t.Errorf("center=%v: exact prediction scored mass %v, want >= %v", center, rep.Model.Mass, wantMass)
		}
		t.Logf("center=%v: exact prediction mass %.4f (chance %.4f), random rows mass %.4f, cos %.3f",
			center, rep.Model.Mass, rep.Model.Chance, rep.Random.Mass, rep.Random.CosMean)
	}
}

// TestUnmixStepReadsBackOnlyTheLoss: a training step hands exactly one value to the host, the total
// loss; the loss terms (which never reach metrics.jsonl) stay on the device until LastParts asks
// for them. On a GPU every read-back is a sync that drains the queue.
func TestUnmixStepReadsBackOnlyTheLoss(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), false)
	task := unmixTestTask(t, s, UnmixEvalConfig{})
	cpuBe, ok := task.Params().Data().Storage().Backend().(*cpu.Backend)
	if !ok {
		t.Fatalf("test model is not on the CPU backend")
	}
	b := unmixTestBatch(t, s, data.Train, 0, 4)
	for step := range 3 {
		before := cpuBe.HostReads()
		l, err := task.Step(b, int64(step))
		if err != nil {
			t.Fatal(err)
		}
		if n := cpuBe.HostReads() - before; n != 1 {
			t.Fatalf("step %d read %d values back to the host, want 1 (the loss)", step, n)
		}
		task.Params().ZeroGrad()
		parts := task.LastParts()
		if v := parts["unmix"]; math.Abs(v-l) > 1e-6*math.Abs(l) {
			t.Fatalf("step %d: LastParts total %v, Step returned %v (terms %v)", step, v, l, parts)
		}
	}
}
