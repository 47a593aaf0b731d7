package train

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
)

// fakeTask has one parameter whose gradient is 1 and a constant loss; its evaluator calls onEval.
type fakeTask struct {
	ps     *engine.Params
	w      *engine.Tensor
	onEval func()
}

func newFakeTask(t *testing.T) *fakeTask {
	t.Helper()
	be, err := engine.NewCPU(engine.CPUConfig{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps := engine.NewParams()
	w := ps.Add("w.weight", []int{2, 2}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	return &fakeTask{ps: ps, w: w}
}

func (f *fakeTask) Params() *engine.Params { return f.ps }

func (f *fakeTask) Step(b *gelo.Batch, step int64) (float64, error) {
	if err := f.w.Grad().CopyFrom([]float32{1, 1, 1, 1}); err != nil {
		return 0, err
	}
	return float64(step%7) + 0.5, nil
}

func (f *fakeTask) NewEvaluator() Evaluator { return &fakeEval{task: f} }

type fakeEval struct {
	task *fakeTask
	n    int
}

func (e *fakeEval) Add(b *gelo.Batch) error {
	if e.task.onEval != nil {
		e.task.onEval()
	}
	e.n++
	return nil
}

func (e *fakeEval) Metrics() map[string]float64 { return map[string]float64{"n": float64(e.n)} }

// An interrupt that arrives during an evaluation lets it finish, then checkpoints at the next step
// boundary: the run stops with ErrInterrupted and the evaluation's lines are all written.
func TestInterruptDuringEvaluationFinishesItAndCheckpoints(t *testing.T) {
	s := unmixTestSampler(t, unmixTestCorpus(t, 40), false)
	task := newFakeTask(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	task.onEval = cancel
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps = 20, 2, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 3, 4, 2, 100
	res, err := Train(ctx, Run{Dir: dir, Options: opts, Task: task, Sampler: s, Progress: io.Discard})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("got %v, want ErrInterrupted", err)
	}
	if res.Steps != 4 {
		t.Fatalf("stopped after %d steps, want 4 (the first evaluation)", res.Steps)
	}
	_, step, err := checkpoints.LatestPath(dir)
	if err != nil || step != 4 {
		t.Fatalf("latest checkpoint %d, %v; want step 4", step, err)
	}
	lines, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	for _, want := range []string{`"eval":"train","n":2,"step":4`, `"eval":"val","n":2,"step":4`} {
		if !bytes.Contains(lines, []byte(want)) {
			t.Fatalf("metrics.jsonl lacks %s:\n%s", want, lines)
		}
	}
}

// A NaN loss stops the run naming the step, and leaves the last good checkpoint as the latest.
func TestNaNLossStopsAndKeepsLastCheckpoint(t *testing.T) {
	s := unmixTestSampler(t, unmixTestCorpus(t, 40), false)
	task := &nanAfter{fakeTask: newFakeTask(t), at: 7}
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps = 20, 2, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 1, 100, 1, 5
	_, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: task, Sampler: s, Progress: io.Discard})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("step 8: loss is NaN")) {
		t.Fatalf("got %v, want an error naming step 8 and the NaN loss", err)
	}
	if _, step, err := checkpoints.LatestPath(dir); err != nil || step != 5 {
		t.Fatalf("latest checkpoint %d, %v; want the last good one, step 5", step, err)
	}
}

type nanAfter struct {
	*fakeTask
	at int64
}

func (n *nanAfter) Step(b *gelo.Batch, step int64) (float64, error) {
	l, err := n.fakeTask.Step(b, step)
	if step == n.at {
		return math.NaN(), err
	}
	return l, err
}
