package decode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/internal/runlock"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// The files of an output directory. options.json, results.jsonl and summary.json are the same
// bytes in every run of the same options, however it was interrupted, resumed or sharded and
// merged; timing.jsonl and results.json (the results with their wall times, as decode's -out
// file was before there were directories) are not.
const (
	OptionsFile = "options.json"
	ResultsFile = "results.jsonl"
	TimingFile  = "timing.jsonl"
	ResultsJSON = "results.json"
	SummaryFile = "summary.json"
)

// outFiles are every file a run writes in its directory.
var outFiles = []string{OptionsFile, ResultsFile, TimingFile, ResultsJSON, SummaryFile}

// ownLines reads one of the directory's own JSON-lines files back (readLines) through a door
// without a memory of inputs: the run appends to what it reads, and the command's door would
// refuse results.jsonl as an input it must not write over.
func ownLines(path string) ([][]byte, bool, error) { return readLines(nil, path) }

// Dir is a decode's output directory, open for one run: locked against a second process, its
// options record checked, the batches already in its results.jsonl known.
type Dir struct {
	path  string
	rec   Record
	files *safefile.Files
	lock  *runlock.Lock
	done  map[int64]bool
	// Notes say what opening it did that a user should hear: a cut line dropped, a stale lock
	// taken over.
	Notes []string
}

// OpenDir opens path as the output directory of the run rec records, before the run loads
// anything large. Without resume the directory must be new or empty; with resume it must be new,
// empty, or hold options.json equal to rec (else the error names the first option that differs),
// and results.jsonl's batches, in the order the run writes them, are kept: a cut last line is
// removed, and the run skips them (Pending). files is the command's door (nil: one without a
// memory of inputs).
func OpenDir(path string, rec Record, resume bool, files *safefile.Files) (*Dir, error) {
	if err := rec.check(); err != nil {
		return nil, err
	}
	if err := checkOutDir(path, resume); err != nil {
		return nil, err
	}
	lock, err := runlock.Acquire(path)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	d := &Dir{path: path, rec: rec, files: files, lock: lock, done: map[int64]bool{}}
	if lock.Stale != "" {
		d.Notes = append(d.Notes, fmt.Sprintf("%s: %s", path, lock.Stale))
	}
	if err := d.open(resume); err != nil {
		lock.Release()
		return nil, err
	}
	return d, nil
}

// checkOutDir refuses, before the lock is taken, a path that is not a directory and a directory
// that holds anything without resume, or holds no options record with it.
func checkOutDir(path string, resume bool) error {
	if path == "" {
		return errors.New("decode: no output directory")
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new directory: resume starts it too (a job array reruns one command line)
	case err != nil:
		return fmt.Errorf("decode: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("decode: %s is not a directory: the output is a directory (%s)", path, strings.Join(outFiles, ", "))
	}
	names, err := listDir(path)
	if err != nil {
		return err
	}
	switch {
	case len(names) == 0:
		return nil
	case !resume:
		return fmt.Errorf("decode: %s already holds %s: not writing over a decode (continue it with -resume, or name a new or empty directory)",
			path, strings.Join(names[:min(len(names), 4)], ", "))
	case !slices.Contains(names, OptionsFile):
		return fmt.Errorf("decode: -resume: %s holds %s but no %s: not a decode's output directory",
			path, strings.Join(names[:min(len(names), 4)], ", "), OptionsFile)
	}
	return nil
}

// listDir lists dir's entries but the lock file.
func listDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != runlock.FileName {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// open checks every output, compares or writes the record, and reads the batches done.
func (d *Dir) open(resume bool) error {
	for _, f := range outFiles {
		if err := d.files.CheckOutput(d.file(f)); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
	}
	recPath := d.file(OptionsFile)
	had, err := safefile.ReadNoFollow(recPath, safefile.RunRecord) // its own file: as ownLines
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := d.files.WriteFileAtomic(recPath, d.rec.encode()); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		return nil // nothing else can be there: checkOutDir saw an empty directory or none
	case err != nil:
		return fmt.Errorf("decode: %w", err)
	}
	old, err := parseRecord(recPath, had)
	if err != nil {
		return err
	}
	if err := diff(old, d.rec); err != nil {
		return fmt.Errorf("decode: -resume: %s is another run's: %w; resume with the options it records, or name a new directory", recPath, err)
	}
	return d.readDone()
}

// file is name's path in the directory.
func (d *Dir) file(name string) string { return filepath.Join(d.path, name) }

// plan is the shard's batches, in the order the run writes them.
func (d *Dir) plan() []int64 {
	var out []int64
	for b := range int64(d.rec.Batches) {
		if d.rec.Shard.Owns(int(b)) {
			out = append(out, b)
		}
	}
	return out
}

// readDone reads results.jsonl on resume: its lines must be the first batches of the shard's plan,
// in order; a cut last line is removed, and timing.jsonl keeps only the lines of those batches.
func (d *Dir) readDone() error {
	path := d.file(ResultsFile)
	lines, torn, err := ownLines(path)
	if err != nil {
		return err
	}
	plan := d.plan()
	if len(lines) > len(plan) {
		return fmt.Errorf("decode: -resume: %s holds %d batches, more than the %d of shard %s", path, len(lines), len(plan), d.rec.Shard)
	}
	for i, l := range lines {
		r, err := parseResult(path, i+1, l)
		if err != nil {
			return err
		}
		if r.Index != plan[i] {
			return fmt.Errorf("decode: -resume: %s:%d is batch %d, want batch %d, the next of shard %s of %d batches: the file was not written by this run",
				path, i+1, r.Index, plan[i], d.rec.Shard, d.rec.Batches)
		}
		d.done[r.Index] = true
	}
	if torn {
		if err := d.files.WriteFileAtomic(path, joinLines(lines)); err != nil {
			return fmt.Errorf("decode: -resume: %w", err)
		}
		d.Notes = append(d.Notes, fmt.Sprintf("%s: a cut last line (a batch being appended when the run stopped) removed; that batch runs again", path))
	}
	return d.trimTiming()
}

// trimTiming keeps in timing.jsonl one line for each batch done, the first, dropping a cut line
// and the lines of batches whose result was not appended.
func (d *Dir) trimTiming() error {
	path := d.file(TimingFile)
	lines, torn, err := ownLines(path)
	if err != nil {
		return err
	}
	var keep [][]byte
	seen := map[int64]bool{}
	for i, l := range lines {
		t, err := parseTiming(path, i+1, l)
		if err != nil {
			return err
		}
		if d.done[t.Batch] && !seen[t.Batch] {
			keep, seen[t.Batch] = append(keep, l), true
		}
	}
	if torn || len(keep) < len(lines) {
		if err := d.files.WriteFileAtomic(path, joinLines(keep)); err != nil {
			return fmt.Errorf("decode: -resume: %w", err)
		}
	}
	return nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Record is the run's record.
func (d *Dir) Record() Record { return d.rec }

// Total is the shard's batches; Done those in results.jsonl.
func (d *Dir) Total() int { return len(d.plan()) }

// Done is the number of the shard's batches in results.jsonl.
func (d *Dir) Done() int { return len(d.done) }

// Pending reports whether batch b is still to run here: the shard's, and not in results.jsonl.
func (d *Dir) Pending(b int64) bool { return d.rec.Shard.Owns(int(b)) && !d.done[b] }

// Append adds a finished batch: its result to results.jsonl, then its wall time to timing.jsonl,
// each fsynced (a crash between the two leaves a batch without its time, never the reverse).
func (d *Dir) Append(r BatchResult) error {
	if !d.Pending(r.Index) || r.Index >= int64(d.rec.Batches) {
		return fmt.Errorf("decode: batch %d is not one this run still owes %s (shard %s of %d batches)", r.Index, d.path, d.rec.Shard, d.rec.Batches)
	}
	line, err := resultLine(r)
	if err != nil {
		return err
	}
	if err := d.files.AppendSync(d.file(ResultsFile), line); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	d.done[r.Index] = true
	if err := d.files.AppendSync(d.file(TimingFile), timingLine(r)); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// Results reads the batches back from results.jsonl, in its order, each with its wall time from
// timing.jsonl (0 where it has none).
func (d *Dir) Results() ([]BatchResult, error) {
	path := d.file(ResultsFile)
	lines, _, err := ownLines(path)
	if err != nil {
		return nil, err
	}
	res := make([]BatchResult, len(lines))
	for i, l := range lines {
		if res[i], err = parseResult(path, i+1, l); err != nil {
			return nil, err
		}
	}
	tpath := d.file(TimingFile)
	tlines, _, err := ownLines(tpath)
	if err != nil {
		return nil, err
	}
	secs := map[int64]float64{}
	for i, l := range tlines {
		t, err := parseTiming(tpath, i+1, l)
		if err != nil {
			return nil, err
		}
		if _, ok := secs[t.Batch]; !ok {
			secs[t.Batch] = t.Seconds
		}
	}
	for i := range res {
		res[i].Seconds = secs[res[i].Index]
	}
	return res, nil
}

// WriteSummary computes the summary from results.jsonl and writes it (summary.json) with the
// results and their wall times (results.json); bagOnly is the run's Options.BagOnly.
func (d *Dir) WriteSummary(bagOnly bool) (Summary, []BatchResult, error) {
	res, err := d.Results()
	if err != nil {
		return Summary{}, nil, err
	}
	s := Summarize(res, bagOnly)
	s.Planned = d.Total()
	for name, v := range map[string]any{ResultsJSON: res, SummaryFile: s} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return Summary{}, nil, fmt.Errorf("decode: encoding %s: %w", name, err)
		}
		if err := d.files.WriteFileAtomic(d.file(name), append(b, '\n')); err != nil {
			return Summary{}, nil, fmt.Errorf("decode: %w", err)
		}
	}
	return s, res, nil
}

// Close gives the directory's lock back. Safe twice.
func (d *Dir) Close() error {
	if d == nil {
		return nil
	}
	return d.lock.Release()
}

// Run decodes the batches of opt that the directory still owes (the shard's, not yet in
// results.jsonl), appending each as it finishes; opt.OnBatch, when set, hears each one after it is
// appended. opt.Batches must be the record's. A cancelled ctx stops it with what is done kept.
func (d *Dir) Run(ctx context.Context, m Model, texts [][]int, opt Options) error {
	if opt.Batches != d.rec.Batches {
		return fmt.Errorf("decode: %d batches for a directory recording %d", opt.Batches, d.rec.Batches)
	}
	if d.Done() == d.Total() {
		return nil
	}
	skip, hear := opt.Skip, opt.OnBatch
	opt.Skip = func(b int64) bool { return !d.Pending(b) || skip != nil && skip(b) }
	opt.OnBatch = func(r BatchResult) error {
		if err := d.Append(r); err != nil {
			return err
		}
		if hear != nil {
			return hear(r)
		}
		return nil
	}
	_, err := Run(ctx, m, texts, opt)
	return err
}
