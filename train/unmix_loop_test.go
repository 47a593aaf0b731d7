package train

import (
	"context"
	"io"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// unmixTestTask is a small unmix model with 8 slots (= n_clean) under a 20-iteration balanced loss.
func unmixTestTask(t testing.TB, s *gelo.Sampler, ev tasks.UnmixEvalConfig) *tasks.Unmix {
	t.Helper()
	task, err := tasks.NewUnmix(taskstest.CPU(t), taskstest.UnmixModel(), taskstest.UnmixLoss(), s, ev, 9)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestUnmixInTrainLoop: the unmix task runs in the trainer end to end (steps, evaluation on both
// splits, checkpoint) and its final evaluation carries the unmix metrics.
func TestUnmixInTrainLoop(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), false)
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
