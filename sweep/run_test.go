package sweep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/internal/runlock"
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/train"
)

const fourCells = tinyBase + `axes:
  sampler.shield_kind: [gaussian, manifold]
  sampler.shield_scale: [0.5, 4]
`

type call struct {
	cell   string
	resume bool
}

// fakeTrainer stands in for runner.TrainLocked: it records its calls and writes what a run leaves behind
// (config.yaml and report.json), or fails, or is interrupted, as told.
type fakeTrainer struct {
	mu        sync.Mutex
	calls     []call
	fail      map[string]error
	interrupt string
	cancel    context.CancelFunc
}

func (f *fakeTrainer) train(ctx context.Context, cfg config.Run, dir string, resume bool, _ io.Writer) (train.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{cfg.Name, resume})
	f.mu.Unlock()
	if err := writeCellConfig(dir, cfg); err != nil {
		return train.Result{}, err
	}
	if err := f.fail[cfg.Name]; err != nil {
		return train.Result{}, err
	}
	if cfg.Name == f.interrupt {
		f.cancel()
		return train.Result{}, writeLatest(dir, 10, train.ErrInterrupted)
	}
	res := train.Result{Steps: int64(cfg.Train.Steps), Final: map[string]map[string]float64{
		"val": {"pos_mass": 0.5, "pos_mass_chance": 0.1},
	}}
	return res, train.WriteReport(dir, cfg.Name, res)
}

func writeCellConfig(dir string, cfg config.Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := cfg.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644)
}

// writeLatest makes dir look checkpointed at step (the latest pointer is all Inspect reads), then
// returns ret.
func writeLatest(dir string, step int64, ret error) error {
	if err := os.WriteFile(filepath.Join(dir, checkpoints.LatestFile), []byte(checkpoints.CheckpointName(step)+"\n"), 0o644); err != nil {
		return err
	}
	return ret
}

func outcomes(s Summary) map[string]Outcome {
	m := map[string]Outcome{}
	for _, c := range s.Cells {
		m[c.Name] = c.Outcome
	}
	return m
}

func TestRunSkipsFinishedResumesInterruptedStartsFresh(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	c0, c1, c2, c3 := sw.Cells[0], sw.Cells[1], sw.Cells[2], sw.Cells[3]
	// c0 finished, c1 checkpointed, c2 started but killed before its first checkpoint, c3 untouched.
	if err := writeCellConfig(filepath.Join(out, c0.Name), c0.Config); err != nil {
		t.Fatal(err)
	}
	if err := train.WriteReport(filepath.Join(out, c0.Name), "x", train.Result{Steps: 20}); err != nil {
		t.Fatal(err)
	}
	if err := writeCellConfig(filepath.Join(out, c1.Name), c1.Config); err != nil {
		t.Fatal(err)
	}
	if err := writeLatest(filepath.Join(out, c1.Name), 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := writeCellConfig(filepath.Join(out, c2.Name), c2.Config); err != nil {
		t.Fatal(err)
	}
	f := &fakeTrainer{}
	var log bytes.Buffer
	sum, err := Run(context.Background(), sw, Options{Out: out, Progress: &log, Train: f.train})
	if err != nil {
		t.Fatal(err)
	}
	want := []call{{c1.Name, true}, {c2.Name, false}, {c3.Name, false}}
	if len(f.calls) != len(want) {
		t.Fatalf("train calls %v, want %v", f.calls, want)
	}
	for i := range want {
		if f.calls[i] != want[i] {
			t.Errorf("call %d: %v, want %v", i, f.calls[i], want[i])
		}
	}
	o := outcomes(sum)
	if o[c0.Name] != Skipped || o[c1.Name] != Resumed || o[c2.Name] != Started || o[c3.Name] != Started {
		t.Errorf("outcomes %v", o)
	}
	for _, w := range []string{"cell 1/4 " + c0.Name + ": finished before, skipped", "cell 2/4 " + c1.Name + ": resuming from the checkpoint at step 10", "cell 4/4 " + c3.Name + ": starting"} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, log.String())
		}
	}
	// A second run has nothing left to do.
	f2 := &fakeTrainer{}
	sum, err = Run(context.Background(), sw, Options{Out: out, Train: f2.train})
	if err != nil || len(f2.calls) != 0 || sum.Count(Skipped) != 4 {
		t.Fatalf("re-run: err %v, calls %v, %d skipped", err, f2.calls, sum.Count(Skipped))
	}
}

func TestFailedCellDoesNotStopTheSweep(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	bad := sw.Cells[1].Name
	f := &fakeTrainer{fail: map[string]error{bad: errors.New("loss is NaN at step 3")}}
	sum, err := Run(context.Background(), sw, Options{Out: out, Train: f.train})
	if err == nil || !strings.Contains(err.Error(), "1 of 4 cells failed") || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("error %v", err)
	}
	if len(f.calls) != 4 || sum.Count(Failed) != 1 || sum.Count(Started) != 3 {
		t.Fatalf("calls %v, outcomes %v", f.calls, outcomes(sum))
	}
	st, _ := Inspect(filepath.Join(out, bad))
	if st.Finished || !strings.Contains(st.Failure, "NaN") {
		t.Fatalf("failed cell status %+v", st)
	}
	// Fixed: the next run trains only the failed cell and clears its error.
	f2 := &fakeTrainer{}
	if _, err := Run(context.Background(), sw, Options{Out: out, Train: f2.train}); err != nil {
		t.Fatal(err)
	}
	if len(f2.calls) != 1 || f2.calls[0].cell != bad {
		t.Fatalf("re-run calls %v", f2.calls)
	}
	if st, _ := Inspect(filepath.Join(out, bad)); !st.Finished || st.Failure != "" {
		t.Fatalf("after the re-run: %+v", st)
	}
}

func TestCellOfAnotherConfigIsNotReused(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	c := sw.Cells[0]
	old := c.Config
	old.Train.Steps = 999
	if err := writeCellConfig(filepath.Join(out, c.Name), old); err != nil {
		t.Fatal(err)
	}
	if err := train.WriteReport(filepath.Join(out, c.Name), "x", train.Result{Steps: 999}); err != nil {
		t.Fatal(err)
	}
	f := &fakeTrainer{}
	sum, err := Run(context.Background(), sw, Options{Out: out, Train: f.train})
	if err == nil || !strings.Contains(err.Error(), "train.steps: 999 -> 20") {
		t.Fatalf("error %v", err)
	}
	if outcomes(sum)[c.Name] != Failed || len(f.calls) != 3 {
		t.Fatalf("outcomes %v calls %v", outcomes(sum), f.calls)
	}
}

func TestInterruptStopsAfterTheRunningCell(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeTrainer{interrupt: sw.Cells[1].Name, cancel: cancel}
	sum, err := Run(ctx, sw, Options{Out: out, Train: f.train})
	if !errors.Is(err, train.ErrInterrupted) || !strings.Contains(err.Error(), sw.Cells[1].Name) {
		t.Fatalf("error %v", err)
	}
	if len(f.calls) != 2 || outcomes(sum)[sw.Cells[1].Name] != Interrupted {
		t.Fatalf("calls %v outcomes %v", f.calls, outcomes(sum))
	}
	f2 := &fakeTrainer{}
	if _, err := Run(context.Background(), sw, Options{Out: out, Train: f2.train}); err != nil {
		t.Fatal(err)
	}
	want := []call{{sw.Cells[1].Name, true}, {sw.Cells[2].Name, false}, {sw.Cells[3].Name, false}}
	if len(f2.calls) != 3 || f2.calls[0] != want[0] || f2.calls[1] != want[1] || f2.calls[2] != want[2] {
		t.Fatalf("re-run calls %v, want %v", f2.calls, want)
	}
}

func TestShardsRunDisjointCellsAndShareThePlan(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	seen := map[string]int{}
	for i := 0; i < 3; i++ {
		f := &fakeTrainer{}
		if _, err := Run(context.Background(), sw, Options{Out: out, Shard: Shard{Index: i, Count: 3}, Train: f.train}); err != nil {
			t.Fatal(err)
		}
		for _, c := range f.calls {
			seen[c.cell]++
		}
	}
	for _, c := range sw.Cells {
		if seen[c.Name] != 1 {
			t.Errorf("cell %s trained %d times", c.Name, seen[c.Name])
		}
	}
	p, err := ReadPlan(out)
	if err != nil || p.Sweep != "sw" || len(p.Cells) != 4 || p.Cells[3].Name != sw.Cells[3].Name {
		t.Fatalf("plan %+v, %v", p, err)
	}
	// Another sweep may not write into the same directory.
	other := mustParse(t, tinyBase+"axes:\n  sampler.shield_scale: [2]\n")
	if _, err := Run(context.Background(), other, Options{Out: out, Train: (&fakeTrainer{}).train}); err == nil || !strings.Contains(err.Error(), "different sweep") {
		t.Fatalf("second sweep in the same directory: %v", err)
	}
}

// cancelAt cancels when a progress line reports a given step, so a real training run is
// interrupted at a deterministic point.
type cancelAt struct {
	w      io.Writer
	marker string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.marker)) {
		c.cancel()
	}
	return c.w.Write(p)
}

// Real tiny runs: interrupt the second cell mid-way, run the sweep again, and the resumed cell
// ends with exactly the metrics of an uninterrupted run. The interrupt lands on a log step (12 of
// log_every 2) because train does not carry a partly summed loss window across a resume, so an
// off-grid interrupt changes the first loss line after it (not the weights or the evaluations).
func TestRealCellsInterruptedAndResumedMatchUninterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("trains tiny models")
	}
	sw := mustParse(t, tinyBase+"axes:\n  sampler.shield_scale: [0.5, 4]\n")
	out, ref := t.TempDir(), t.TempDir()
	var log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second := sw.Cells[1].Name
	interrupting := func(ctx context.Context, cfg config.Run, dir string, resume bool, w io.Writer) (train.Result, error) {
		if cfg.Name == second {
			w = &cancelAt{w: w, marker: "step 12/20", cancel: cancel}
		}
		return runner.TrainLocked(ctx, cfg, dir, resume, w)
	}
	sum, err := Run(ctx, sw, Options{Out: out, Progress: &log, Train: interrupting})
	if !errors.Is(err, train.ErrInterrupted) {
		t.Fatalf("error %v, want interrupted\n%s", err, log.String())
	}
	if o := outcomes(sum); o[sw.Cells[0].Name] != Started || o[second] != Interrupted {
		t.Fatalf("outcomes %v", o)
	}
	// The advice is the true command: sweep has no -resume flag (issue 24: it used to say
	// "continue with -resume").
	if msg := log.String() + err.Error(); strings.Contains(msg, "-resume") || !strings.Contains(err.Error(), "run the same command again") {
		t.Errorf("interrupted sweep gives the wrong advice:\n%s\n%v", log.String(), err)
	}
	st, err := Inspect(filepath.Join(out, second))
	if err != nil || st.Finished || st.Checkpoint < 12 || st.Checkpoint >= 20 {
		t.Fatalf("interrupted cell: %+v %v", st, err)
	}
	log.Reset()
	sum, err = Run(context.Background(), sw, Options{Out: out, Progress: &log})
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomes(sum); o[sw.Cells[0].Name] != Skipped || o[second] != Resumed {
		t.Fatalf("outcomes %v\n%s", o, log.String())
	}
	if _, err := Run(context.Background(), sw, Options{Out: ref}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"metrics.jsonl", ReportFile} {
		a, err1 := os.ReadFile(filepath.Join(ref, second, f))
		b, err2 := os.ReadFile(filepath.Join(out, second, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s of the resumed cell differs from an uninterrupted run (%v, %v)", f, err1, err2)
		}
	}
}

// An interrupt that lands while a cell evaluates comes back as an ordinary error; the cell is
// still interrupted (to be resumed), not failed.
func TestInterruptDuringEvaluationIsNotAFailure(t *testing.T) {
	sw := mustParse(t, fourCells)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evalCancelled := func(ctx context.Context, cfg config.Run, dir string, resume bool, w io.Writer) (train.Result, error) {
		cancel()
		return train.Result{}, errors.New("step 10: eval: gelo pipeline: context canceled")
	}
	sum, err := Run(ctx, sw, Options{Out: t.TempDir(), Train: evalCancelled})
	if !errors.Is(err, train.ErrInterrupted) || len(sum.Cells) != 1 || sum.Cells[0].Outcome != Interrupted {
		t.Fatalf("error %v, cells %+v", err, sum.Cells)
	}
}

// A cell whose directory another process holds (an overlapping shard) is left alone and reported,
// and the sweep goes on with the other cells; running again once it is free trains it.
func TestCellHeldByAnotherProcessIsLeftToIt(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	held := sw.Cells[2].Name
	lock, err := runlock.Acquire(filepath.Join(out, held))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTrainer{}
	sum, err := Run(context.Background(), sw, Options{Out: out, Train: f.train})
	if err == nil || !strings.Contains(err.Error(), held) || !strings.Contains(err.Error(), "in use by pid") {
		t.Fatalf("error %v, want the held cell named with its holder", err)
	}
	if len(f.calls) != 3 || sum.Count(Busy) != 1 || sum.Count(Started) != 3 {
		t.Fatalf("calls %v, outcomes %v", f.calls, outcomes(sum))
	}
	if _, err := os.Stat(filepath.Join(out, held, ErrorFile)); err == nil {
		t.Errorf("the busy cell got an %s written into the other process's directory", ErrorFile)
	}
	lock.Release()
	f2 := &fakeTrainer{}
	if _, err := Run(context.Background(), sw, Options{Out: out, Train: f2.train}); err != nil {
		t.Fatal(err)
	}
	if len(f2.calls) != 1 || f2.calls[0].cell != held {
		t.Fatalf("re-run calls %v, want only %s", f2.calls, held)
	}
}
