package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/internal/runlock"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/train"
)

// TrainFunc trains one run in a directory whose lock the caller holds; runner.TrainLocked is the
// real one.
type TrainFunc func(ctx context.Context, cfg config.Run, dir string, resume bool, progress io.Writer) (train.Result, error)

// Options says where and which part of a sweep to run.
type Options struct {
	// Out is the sweep's output directory: PlanFile and one directory per cell.
	Out string
	// Shard selects the cells to run; the zero value means All.
	Shard Shard
	// Cells, when not nil, are the 0-based indices of the only cells to run, in increasing order
	// (see Sweep.SelectCells); Shard must then be All. The plan still lists every cell, so the
	// report names the others as not finished rather than dropping them.
	Cells []int
	// Progress receives one line per cell and the cells' training progress; nil discards it.
	Progress io.Writer
	// Train trains one cell in a directory whose lock Run already holds; nil means
	// runner.TrainLocked.
	Train TrainFunc
}

// Outcome is what Run did with a cell.
type Outcome string

const (
	// Skipped: the cell had finished before (report.json present).
	Skipped Outcome = "skipped"
	// Resumed: the cell had a checkpoint and was trained to the end from it.
	Resumed Outcome = "resumed"
	// Started: the cell was trained from the start to the end.
	Started Outcome = "started"
	// Failed: the cell's training failed, or its directory holds a run of another config.
	Failed Outcome = "failed"
	// Interrupted: the context was cancelled while the cell trained; it checkpointed.
	Interrupted Outcome = "interrupted"
	// Busy: another process holds the cell's lock (an overlapping shard, a second sweep on the
	// same output); the cell was left to it, untouched.
	Busy Outcome = "busy"
)

// CellResult is the outcome of one cell of the shard.
type CellResult struct {
	// Index is the cell's 0-based position in the sweep.
	Index int
	// Name is the cell's directory name.
	Name string
	// Outcome is what happened.
	Outcome Outcome
	// Err is the failure, for Failed.
	Err error
}

// Summary lists what Run did, cell by cell, in order.
type Summary struct {
	// Cells are the shard's cells that Run reached.
	Cells []CellResult
}

// Count is the number of cells with outcome o.
func (s Summary) Count(o Outcome) int {
	n := 0
	for _, c := range s.Cells {
		if c.Outcome == o {
			n++
		}
	}
	return n
}

// Run runs the shard's cells one after another in o.Out. A finished cell (report.json present) is
// skipped; a cell with a checkpoint resumes from it; any other cell starts afresh. A cell that
// fails is reported, its error saved in its error.txt, and the sweep goes on with the next; the
// returned error then names every failed cell. When ctx is cancelled the running cell checkpoints
// and Run returns an error wrapping train.ErrInterrupted: running the same sweep again continues.
// A cell whose directory holds a run of a different config fails rather than being reused.
func Run(ctx context.Context, sw *Sweep, o Options) (Summary, error) {
	var sum Summary
	if o.Shard == (Shard{}) {
		o.Shard = shard.All()
	}
	if err := o.Shard.Validate(); err != nil {
		return sum, err
	}
	if err := checkChosen(o.Cells, len(sw.Cells), o.Shard); err != nil {
		return sum, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Train == nil {
		o.Train = runner.TrainLocked
	}
	if o.Out == "" {
		return sum, errors.New("sweep: no output directory")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return sum, fmt.Errorf("sweep output: %w", err)
	}
	if err := writePlan(o.Out, sw.Plan()); err != nil {
		return sum, err
	}
	var mine []int
	for i := range sw.Cells {
		if o.Shard.Owns(i) {
			mine = append(mine, i)
		}
	}
	part := "in this shard"
	if o.Cells != nil {
		mine, part = o.Cells, "chosen"
	}
	n := len(sw.Cells)
	head := "sweep " + sw.Name
	if o.Shard.Count > 1 {
		head += " shard " + o.Shard.String()
	}
	fmt.Fprintf(o.Progress, "%s: %d cells, %d %s, output %s\n", head, n, len(mine), part, o.Out)
	for k, i := range mine {
		c := sw.Cells[i]
		tag := fmt.Sprintf("%s: cell %d/%d", head, i+1, n)
		switch {
		case o.Shard.Count > 1:
			tag += fmt.Sprintf(" (%d of %d in shard)", k+1, len(mine))
		case o.Cells != nil:
			tag += fmt.Sprintf(" (%d of %d chosen)", k+1, len(mine))
		}
		tag += " " + c.Name
		if ctx.Err() != nil {
			fmt.Fprintf(o.Progress, "%s: not started, interrupted\n", tag)
			return sum, fmt.Errorf("%s interrupted before cell %s: %w; run the same command again to continue", head, c.Name, train.ErrInterrupted)
		}
		res := runCell(ctx, c, filepath.Join(o.Out, c.Name), tag, o)
		res.Index = i
		sum.Cells = append(sum.Cells, res)
		if res.Outcome == Interrupted {
			return sum, fmt.Errorf("%s interrupted in cell %s: %w; run the same command again to resume it", head, c.Name, train.ErrInterrupted)
		}
	}
	busy := ""
	if b := sum.Count(Busy); b > 0 {
		busy = fmt.Sprintf(", %d busy in another process", b)
	}
	fmt.Fprintf(o.Progress, "%s: done: %d skipped, %d resumed, %d started, %d failed%s\n", head,
		sum.Count(Skipped), sum.Count(Resumed), sum.Count(Started), sum.Count(Failed), busy)
	if f := sum.Count(Failed) + sum.Count(Busy); f > 0 {
		var names []string
		for _, c := range sum.Cells {
			if c.Outcome == Failed || c.Outcome == Busy {
				names = append(names, fmt.Sprintf("%s (%v)", c.Name, c.Err))
			}
		}
		return sum, fmt.Errorf("%s: %d of %d cells failed or are held by another process: %s", head, f, len(mine), strings.Join(names, "; "))
	}
	return sum, nil
}

// checkChosen checks Options.Cells against a sweep of n cells: indices in range and increasing,
// and no shard beside them (a shard is every N-th cell of the whole sweep, a job array's share of
// it; which of the chosen cells a shard should then run has no one obvious answer).
func checkChosen(cells []int, n int, shard Shard) error {
	if cells == nil {
		return nil
	}
	if shard.Count > 1 {
		return fmt.Errorf("sweep: chosen cells and shard %s together: run the chosen cells without a shard", shard)
	}
	for k, i := range cells {
		if i < 0 || i >= n || (k > 0 && i <= cells[k-1]) {
			return fmt.Errorf("sweep: chosen cells %v: want increasing indices in [0, %d)", cells, n)
		}
	}
	return nil
}

// runCell skips, resumes or starts one cell.
func runCell(ctx context.Context, c Cell, dir, tag string, o Options) CellResult {
	res := CellResult{Name: c.Name}
	fail := func(err error) CellResult {
		res.Outcome, res.Err = Failed, err
		fmt.Fprintf(o.Progress, "%s: FAILED: %v\n", tag, err)
		if mk := os.MkdirAll(dir, 0o755); mk == nil {
			// Best effort: the report shows it; the error is also in the log and the exit status.
			_ = checkpoints.WriteFileAtomic(filepath.Join(dir, ErrorFile), []byte(err.Error()+"\n"))
		}
		return res
	}
	// A linked cell is refused before anything (the lock, error.txt) is written through the link.
	if err := CheckCellDir(dir); err != nil {
		res.Outcome, res.Err = Failed, err
		fmt.Fprintf(o.Progress, "%s: FAILED: %v\n", tag, err)
		return res
	}
	// The lock is taken before the cell's state is read, so that a cell another process is
	// training is neither inspected mid-write nor trained twice; Busy leaves its files alone.
	lock, err := runlock.Acquire(dir)
	if errors.Is(err, runlock.ErrHeld) {
		res.Outcome, res.Err = Busy, err
		fmt.Fprintf(o.Progress, "%s: not run: %v\n", tag, err)
		return res
	}
	if err != nil {
		return fail(err)
	}
	defer lock.Release()
	if lock.Stale != "" {
		fmt.Fprintf(o.Progress, "%s: %s\n", tag, lock.Stale)
	}
	st, err := Inspect(dir)
	if err != nil {
		return fail(err)
	}
	resume := false
	switch {
	case st.Finished:
		if err := sameConfig(dir, c.Config); err != nil {
			return fail(err)
		}
		clearError(dir)
		res.Outcome = Skipped
		fmt.Fprintf(o.Progress, "%s: finished before, skipped\n", tag)
		return res
	case st.Checkpoint >= 0:
		if err := sameConfig(dir, c.Config); err != nil {
			return fail(err)
		}
		resume = true
		fmt.Fprintf(o.Progress, "%s: resuming from the checkpoint at step %d\n", tag, st.Checkpoint)
	default:
		fmt.Fprintf(o.Progress, "%s: starting\n", tag)
	}
	clearError(dir)
	t0 := time.Now()
	r, err := o.Train(ctx, c.Config, dir, resume, o.Progress)
	if err != nil && (errors.Is(err, train.ErrInterrupted) || ctx.Err() != nil) {
		// An interrupt that lands during an evaluation surfaces as that evaluation's error rather
		// than ErrInterrupted; either way the cell is unfinished, not failed, and the next run
		// resumes it from its latest checkpoint.
		res.Outcome = Interrupted
		why := ""
		if !errors.Is(err, train.ErrInterrupted) {
			why = " (" + err.Error() + ")"
		}
		fmt.Fprintf(o.Progress, "%s: interrupted after %s%s\n", tag, time.Since(t0).Round(time.Second), why)
		return res
	}
	if err != nil {
		return fail(err)
	}
	res.Outcome = Started
	if resume {
		res.Outcome = Resumed
	}
	fmt.Fprintf(o.Progress, "%s: %s and finished in %s at step %d%s\n", tag, res.Outcome,
		time.Since(t0).Round(time.Second), r.Steps, headline(r.Final))
	return res
}

// headline is the val mass beside its chance, when the result has one.
func headline(final map[string]map[string]float64) string {
	val := final["val"]
	for _, m := range eval.PrimaryMetrics {
		if v, ok := val[m]; ok {
			return fmt.Sprintf(": val %s %.4f (chance %.4f)", m, v, val[m+eval.ChanceSuffix])
		}
	}
	return ""
}

// clearError removes the error of an earlier attempt. Failing to remove it is not worth failing
// the cell over: a stale error.txt only shows in the report of an unfinished cell.
func clearError(dir string) { _ = os.Remove(filepath.Join(dir, ErrorFile)) }

// sameConfig checks that the run in dir was made with cfg, so that a finished or resumable cell
// of an edited sweep is not silently reused. Settings that do not change results (workers,
// prefetch, device) and the model widths filled in from the store are not compared.
func sameConfig(dir string, cfg config.Run) error {
	path := filepath.Join(dir, ConfigFile)
	src, err := safefile.Read(path, safefile.SweepState)
	if err != nil {
		return fmt.Errorf("cell %s: %w", dir, err)
	}
	got, err := config.Parse(path, src)
	if err != nil {
		return fmt.Errorf("cell %s: %w", dir, err)
	}
	if d := ConfigDiff(got, cfg); d != "" {
		return fmt.Errorf("%s was made with a different config (%s); move the cell away to rerun it, or use another -out", path, d)
	}
	return nil
}

// ConfigDiff names the first field where a run made with had would differ from one made with
// want (see config.Diff).
func ConfigDiff(had, want config.Run) string { return config.Diff(had, want) }
