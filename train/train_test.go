package train

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// fakeTask has one parameter whose gradient is 1 and a constant loss; its evaluator calls onEval.
type fakeTask struct {
	ps     *engine.Params
	w      *engine.Tensor
	onEval func()
}

func newFakeTask(t *testing.T) *fakeTask {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: 1})
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

func (f *fakeTask) NewEvaluator() tasks.Evaluator { return &fakeEval{task: f} }

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
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
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
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
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

// TestTrainUsesZeroBetas: beta1 = 0 and beta2 = 0 reach AdamW as 0 (not its defaults): after one
// step of gradient 1 (no clipping) the checkpointed moments are m = g = 1 and v = g^2 = 1, where
// the defaults would give 0.1 and 0.05.
func TestTrainUsesZeroBetas(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps, opts.GradClip = 1, 2, 0, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 1, 1, 1, 1
	opts.Beta1, opts.Beta2 = 0, 0
	if _, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: newFakeTask(t), Sampler: s, Progress: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoints.LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mom := range []struct {
		name string
		ts   []checkpoints.Tensor
	}{{"m", ck.State.AdamM}, {"v", ck.State.AdamV}} {
		if len(mom.ts) != 1 {
			t.Fatalf("%s: %d tensors, want 1", mom.name, len(mom.ts))
		}
		for i, v := range mom.ts[0].Data {
			if v != 1 {
				t.Fatalf("%s[%d] = %v after one step of gradient 1 with betas 0, want 1", mom.name, i, v)
			}
		}
	}
}

// scoredTask is fakeTask whose evaluations report pos_mass from a table keyed by the steps done
// when they run (0.1 for a step not in it).
type scoredTask struct {
	*fakeTask
	done     int64
	mass     map[int64]float64
	onStep   func(done int64)
	primeKey string
}

func (s *scoredTask) Step(b *gelo.Batch, step int64) (float64, error) {
	s.done = step + 1
	if s.onStep != nil {
		s.onStep(s.done)
	}
	return s.fakeTask.Step(b, step)
}

func (s *scoredTask) NewEvaluator() tasks.Evaluator { return scoredEval{s} }

type scoredEval struct{ task *scoredTask }

func (e scoredEval) Add(*gelo.Batch) error { return nil }

func (e scoredEval) Metrics() map[string]float64 {
	v, ok := e.task.mass[e.task.done]
	if !ok {
		v = 0.1
	}
	return map[string]float64{e.task.primeKey: v, e.task.primeKey + "_chance": 0.05}
}

// TestCheckpointRecordsSeedAndBest: every checkpoint holds the run's seed and the best evaluation
// so far (the highest val primary metric: pos_mass or unmix_mass) with its step, and a resumed
// run carries them on: a run interrupted at step 9 and resumed finishes with the best of all its
// evaluations, including those before the interruption.
func TestCheckpointRecordsSeedAndBest(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	for _, key := range []string{"pos_mass", "unmix_mass"} {
		dir := t.TempDir()
		opts := DefaultOptions()
		opts.Steps, opts.BatchSize, opts.WarmupSteps = 16, 2, 0
		opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery, opts.KeepCkpts = 4, 4, 1, 4, 10
		// Evaluations at steps 4, 8, 12 and 16; the best is at step 8 (12 only ties it).
		mass := map[int64]float64{4: 0.3, 8: 0.7, 12: 0.7, 16: 0.5}
		ctx, cancel := context.WithCancel(context.Background())
		task := &scoredTask{fakeTask: newFakeTask(t), mass: mass, primeKey: key, onStep: func(done int64) {
			if done == 9 {
				cancel()
			}
		}}
		_, err := Train(ctx, Run{Dir: dir, Options: opts, Task: task, Sampler: s, Seed: 42, Progress: io.Discard})
		cancel()
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("%s: first part: %v, want ErrInterrupted", key, err)
		}
		check := func(what string, step, bestStep int64) {
			t.Helper()
			ck, err := checkpoints.LoadCheckpoint(filepath.Join(dir, checkpoints.CheckpointName(step)))
			if err != nil {
				t.Fatal(err)
			}
			st := ck.State
			if st.Seed != 42 || st.BestStep != bestStep || st.Best["val."+key] != mass[bestStep] ||
				st.Best["train."+key] != mass[bestStep] || st.Best["val."+key+"_chance"] != 0.05 {
				t.Fatalf("%s: %s: checkpoint %d: seed %d, best step %d, best %v; want seed 42, best step %d with val.%s %v",
					key, what, step, st.Seed, st.BestStep, st.Best, bestStep, key, mass[bestStep])
			}
		}
		check("first part", 4, 4)
		check("interrupted", 9, 8)
		task.onStep = nil
		if _, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: task, Sampler: s, Seed: 42, From: latest(t, dir), Progress: io.Discard}); err != nil {
			t.Fatalf("%s: resume: %v", key, err)
		}
		check("resumed", 12, 8)
		check("resumed", 16, 8)
		_, err = Train(context.Background(), Run{Dir: dir, Options: opts, Task: task, Sampler: s, Seed: 43, From: latest(t, dir), Progress: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "seed 42, this run has seed 43") {
			t.Fatalf("%s: resume with another seed: %v", key, err)
		}
	}
}

// latest is the newest good checkpoint of dir, as runner.Train hands it to Train on -resume.
func latest(t *testing.T, dir string) *checkpoints.Checkpoint {
	t.Helper()
	ck, _, err := checkpoints.LoadLatestGood(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &ck
}

// A resumed run restores the checkpoint it is handed (Run.From), weights and optimizer state, and
// reads none itself: resumed from another run's step-4 checkpoint in a directory that holds no
// checkpoint, it writes at step 8 exactly the weights, moments and step of the run it came from.
func TestResumeRestoresTheCheckpointItIsHanded(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps = 8, 2, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery, opts.KeepCkpts = 4, 4, 1, 4, 10
	ref := t.TempDir()
	if _, err := Train(context.Background(), Run{Dir: ref, Options: opts, Task: newFakeTask(t), Sampler: s, Seed: 42, Progress: io.Discard}); err != nil {
		t.Fatal(err)
	}
	load := func(dir string, step int64) checkpoints.Checkpoint {
		t.Helper()
		ck, err := checkpoints.LoadCheckpoint(filepath.Join(dir, checkpoints.CheckpointName(step)))
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	from := load(ref, 4)
	dir := t.TempDir()
	var log bytes.Buffer
	if _, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: newFakeTask(t), Sampler: s, Seed: 42, From: &from, Progress: &log}); err != nil {
		t.Fatalf("resume from a handed checkpoint: %v\n%s", err, log.String())
	}
	if want := "resuming " + from.Path + " at step 4"; !strings.Contains(log.String(), want) {
		t.Errorf("progress lacks %q:\n%s", want, log.String())
	}
	want, got := load(ref, 8), load(dir, 8)
	if got.State.Step != want.State.Step {
		t.Errorf("step %d, want %d", got.State.Step, want.State.Step)
	}
	for _, part := range []struct {
		name      string
		want, got []checkpoints.Tensor
	}{{"weights", want.Weights, got.Weights}, {"adam.m", want.State.AdamM, got.State.AdamM}, {"adam.v", want.State.AdamV, got.State.AdamV}} {
		if len(part.got) != len(part.want) {
			t.Fatalf("%s: %d tensors, want %d", part.name, len(part.got), len(part.want))
		}
		for i := range part.want {
			if !slices.Equal(part.got[i].Data, part.want[i].Data) {
				t.Errorf("%s %s at step 8: %v, want %v (the uninterrupted run's)", part.name, part.want[i].Name, part.got[i].Data, part.want[i].Data)
			}
		}
	}
}
