package train

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// BeginStep and EndStep make hostBackend a backend that records steps (as CUDA graphs do).
func (b *hostBackend) BeginStep() { b.logStep("begin") }
func (b *hostBackend) EndStep()   { b.logStep("end") }

func (b *hostBackend) logStep(s string) {
	if b.stepLog != nil {
		*b.stepLog = append(*b.stepLog, s)
	}
}

// loggedTask is fakeTask logging each Step.
type loggedTask struct {
	*fakeTask
	log *[]string
}

func (l loggedTask) Step(b *gelo.Batch, step int64) (float64, error) {
	*l.log = append(*l.log, "step")
	return l.fakeTask.Step(b, step)
}

// TestLoopRecordsEachStep: on a backend that records steps (CUDA graphs), the loop brackets each
// step's forward and backward, and nothing else, with BeginStep and EndStep.
func TestLoopRecordsEachStep(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	var log []string
	be := &hostBackend{failAt: 1 << 30, stepLog: &log}
	ps := engine.NewParams()
	w := ps.Add("w.weight", []int{2, 2}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps, opts.GradClip = 3, 2, 0, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 1, 100, 1, 100
	task := loggedTask{fakeTask: &fakeTask{ps: ps, w: w}, log: &log}
	if _, err := Train(context.Background(), Run{Dir: t.TempDir(), Options: opts, Task: task, Sampler: s, Progress: io.Discard}); err != nil {
		t.Fatal(err)
	}
	want := []string{"begin", "step", "end", "begin", "step", "end", "begin", "step", "end"}
	if !slices.Equal(log, want) {
		t.Fatalf("calls %v, want %v", log, want)
	}
}
