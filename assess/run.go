package assess

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/runlock"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
)

// Shard is one of Count interleaved parts of an assessment (internal/shard): it runs batches
// Index, Index+Count, ... of every setting and attack, so N shards cover every batch once, and
// Merge joins them.
type Shard = shard.Shard

// Options says where and how Run works.
type Options struct {
	// Out is the assessment directory: new or empty, or with Resume one this deployment and
	// shard started.
	Out string
	// Resume continues the assessment in Out: the batches in its results.jsonl are kept (a cut
	// last line is removed) and the rest run, so the file ends as one uninterrupted run's.
	Resume bool
	// Shard selects the batches to run (the zero value: all).
	Shard Shard
	// Redact leaves the prompts' texts out of the reports (results.jsonl keeps them: it is the
	// raw data).
	Redact bool
	// Progress receives a line per finished batch with the overall ETA (nil: none).
	Progress io.Writer
	// Log, when set, hears each attack's stages within a batch.
	Log func(string)
	// Files is the command's door (nil: one without a memory of inputs).
	Files *safefile.Files
	// AfterBatch, when set, is called after each batch's rows are appended, with the batches
	// done and the total of the shard (tests cancel a run there).
	AfterBatch func(done, total int)
	// Backend is the device the attacker's decoder runs on (cmd/geloattack opens it from -device:
	// fp32 GEMMs, the decoder's kernels checked); nil: the CPU. Run does not close it. It is not
	// part of the deployment (deployment.yaml): the device changes the attacker's rows by fp32
	// rounding only, which the claims' recomputation bound allows, so a resume or a shard on
	// another device continues the same assessment (byte-equal to an uninterrupted run only on
	// the same device).
	Backend engine.Backend
	// DeployerRows, when set, is Env.DeployerRows: the rows a deployer whose forward differs
	// from the attacker's mixed into U (tests play a bf16 deployer with it).
	DeployerRows func(block int, textID int64, rows []float32) ([]float32, error)
}

// Outcome is what Run did.
type Outcome struct {
	// Deployment is the resolved deployment.
	Deployment Deployment
	// Done and Total count the shard's batches (one attack, one setting each); Skipped those
	// found done on resume.
	Done, Total, Skipped int
	// Summary is the report's content.
	Summary *Summary
}

// unit is a planned batch with its attack and the rows it writes.
type unit struct {
	Unit
	attack Attack
	rows   int
}

// slot is one unit of an attack at a setting as the deployment alone determines it: its batch
// number, the rows it writes, the batch of prompts it sends and, for content recovery, its
// victim. Run's plan and Merge's check of completeness both read it.
type slot struct {
	batch, rows, prompts int
	secret               *SecretVictim
}

// slotsOf are attack a's units at one setting of d, in the order results.jsonl holds them: a
// batch of texts per call prompts each (the last one shorter), or for content recovery one
// victim each, template by template, its secrets' victims first, then its look-alikes; victim v
// joins the prompts of full batch v mod (full batches), and its secret is drawn from its own seed.
func slotsOf(d Deployment, a Attack) []slot {
	per, count := d.Batch.TextsPerCall, d.Prompts.Count
	var out []slot
	if a.Name() != contentName {
		for b := 0; b*per < count; b++ {
			out = append(out, slot{batch: b, rows: min(per, count-b*per), prompts: b})
		}
		return out
	}
	full := max(1, count/per)
	n := d.Secrets.Victims + d.Secrets.AbsentVictims
	for ti := range d.Secrets.Templates {
		for v := range n {
			out = append(out, slot{batch: ti*n + v, rows: 1, prompts: v % full, secret: &SecretVictim{Template: ti, Victim: v,
				Absent: absentKind(v, d.Secrets.Victims), Seed: secretSeed(d.Seed, ti, v)}})
		}
	}
	return out
}

// secretSeed is the seed content.Run draws template ti's victim v's secret from: one stream per
// (seed, template, victim), so every setting and block draws the same secret.
func secretSeed(seed uint64, ti, v int) uint64 {
	return rand.New(rand.NewPCG(seed, uint64(ti)<<32|uint64(v))).Uint64()
}

// plan lists the shard's units in the order results.jsonl holds them: settings, then attacks,
// then batches (slotsOf), as Deployment.Settings and attacker.attacks order them. Attacks that do
// not apply are left out.
func plan(d Deployment, t *Target, shard Shard) ([]unit, error) {
	attacks, err := attacksOf(d)
	if err != nil {
		return nil, err
	}
	per := d.Batch.TextsPerCall
	var out []unit
	for si, s := range d.Settings() {
		for ai, a := range attacks {
			if a.Check(d) != nil {
				continue
			}
			for _, sl := range slotsOf(d, a) {
				if !shard.Owns(sl.batch) {
					continue
				}
				out = append(out, unit{Unit: Unit{Setting: s, SettingIndex: si, AttackIndex: ai, Batch: sl.batch,
					Prompts: t.Batch(per, sl.prompts), Seed: d.Seed + uint64(sl.batch), Secret: sl.secret}, attack: a, rows: sl.rows})
			}
		}
	}
	return out, nil
}

// Run assesses deployment d (as parsed; Run resolves it against the model) into opt.Out: it
// checks the directory before any work, loads the model and prompts, then runs every batch of the
// shard's plan not yet in results.jsonl, appending its rows (fsynced) as it finishes, and writes
// the reports from results.jsonl at the end, or when ctx is cancelled (then the error says how
// to continue).
func Run(ctx context.Context, d Deployment, opt Options) (*Outcome, error) {
	files := opt.Files
	if files == nil {
		files = new(safefile.Files)
	}
	if opt.Shard.Count == 0 {
		opt.Shard = shard.All()
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("assess: deployment: %w", err)
	}
	lock, err := prepareDir(opt.Out, opt.Resume, files)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	t, err := OpenModel(d, files, opt.Backend)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if d, err = d.Resolve(t.Blocks, t.D); err != nil {
		return nil, fmt.Errorf("assess: deployment: %w", err)
	}
	if err := t.LoadPrompts(ctx, d, files); err != nil {
		return nil, err
	}
	var learned *learnedModel
	if slices.Contains(d.Attacker.Attacks, learnedName) {
		// Opened (and checked against the deployment) before anything is written; what it read
		// goes into deployment.yaml.
		if learned, d.Attacker.LearnedCheckpoint, err = openLearned(d, t); err != nil {
			return nil, err
		}
		defer learned.close()
	}
	var secrets *secretSets
	if a, _ := Lookup(contentName); slices.Contains(d.Attacker.Attacks, contentName) && a.Check(d) == nil {
		// The candidate sets are read, and every filled template checked against the batch,
		// before anything is written; they are embedded on first use.
		corpusDir, _ := corpus.DefaultCorpusDir()
		if secrets, err = openSecrets(d, t, corpusDir); err != nil {
			return nil, err
		}
	}
	dep, err := d.Marshal()
	if err != nil {
		return nil, err
	}
	if err := writeOrCompare(files, filepath.Join(opt.Out, DeploymentFile), dep, opt.Resume, "the resolved deployment"); err != nil {
		return nil, err
	}
	if err := writeOrCompare(files, filepath.Join(opt.Out, ShardFile), []byte(opt.Shard.String()+"\n"), opt.Resume, "the shard"); err != nil {
		return nil, err
	}
	units, err := plan(d, t, opt.Shard)
	if err != nil {
		return nil, err
	}
	resultsPath := filepath.Join(opt.Out, ResultsFile)
	skip, err := resumePoint(files, resultsPath, units)
	if err != nil {
		return nil, err
	}
	out := &Outcome{Deployment: d, Total: len(units), Skipped: skip, Done: skip}
	env := &Env{Deployment: d, Target: t, Log: opt.Log, DeployerRows: opt.DeployerRows, learned: learned, secrets: secrets}
	prog := newProgress(opt.Progress, len(units), skip)
	var runErr error
	for _, u := range units[skip:] {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		start := time.Now()
		rows, err := u.attack.Run(ctx, env, u.Unit)
		if err != nil {
			if ctx.Err() != nil {
				runErr = ctx.Err()
				break
			}
			return out, fmt.Errorf("assess: %s at %s, batch %d: %w", u.attack.Name(), u.Setting.Name, u.Batch, err)
		}
		b, err := encodeRows(rows)
		if err != nil {
			return out, err
		}
		if err := files.AppendSync(resultsPath, b); err != nil {
			return out, fmt.Errorf("assess: %w", err)
		}
		secs := time.Since(start).Seconds()
		tl, _ := json.Marshal(map[string]any{"setting": u.Setting.Name, "attack": u.attack.Name(), "batch": u.Batch,
			"seconds": strconv.FormatFloat(secs, 'f', 3, 64)})
		if err := files.AppendSync(filepath.Join(opt.Out, TimingFile), append(tl, '\n')); err != nil {
			return out, fmt.Errorf("assess: %w", err)
		}
		out.Done++
		prog.batch(u, rows, secs)
		if opt.AfterBatch != nil {
			opt.AfterBatch(out.Done, out.Total)
		}
	}
	sum, err := WriteReports(opt.Out, files, opt.Redact)
	out.Summary = sum
	if err != nil {
		return out, err
	}
	if runErr != nil {
		return out, fmt.Errorf("assess: interrupted after %d of %d batches; what is done is in %s (continue with -resume): %w",
			out.Done, out.Total, resultsPath, runErr)
	}
	prog.finish()
	return out, nil
}

// prepareDir checks the assessment directory before any work and locks it: without resume it
// must be new or empty (it is created), with resume it must hold the assessment's
// deployment.yaml (or be new or empty: it then starts). Every file the run writes is checked as an output.
func prepareDir(dir string, resume bool, files *safefile.Files) (*runlock.Lock, error) {
	if dir == "" {
		return nil, errors.New("assess: no output directory (-out DIR)")
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new directory: -resume starts it (a job array reruns one command line).
	case err != nil:
		return nil, fmt.Errorf("assess: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("assess: %s is not a directory", dir)
	default:
		names, err := listDir(dir)
		if err != nil {
			return nil, err
		}
		_, depErr := os.Lstat(filepath.Join(dir, DeploymentFile))
		switch {
		case len(names) == 0:
		case !resume:
			return nil, fmt.Errorf("assess: %s already holds %s: not writing over an assessment (continue it with -resume, or name a new or empty -out)",
				dir, strings.Join(names[:min(len(names), 4)], ", "))
		case depErr != nil:
			return nil, fmt.Errorf("assess: -resume: %s holds %s but no %s: not an assessment directory",
				dir, strings.Join(names[:min(len(names), 4)], ", "), DeploymentFile)
		}
	}
	lock, err := runlock.Acquire(dir)
	if err != nil {
		return nil, fmt.Errorf("assess: %w", err)
	}
	for _, f := range []string{ResultsFile, TimingFile, DeploymentFile, ShardFile, ReportMD, ReportHTML, FrontierSVG} {
		if err := files.CheckOutput(filepath.Join(dir, f)); err != nil {
			lock.Release()
			return nil, fmt.Errorf("assess: %w", err)
		}
	}
	return lock, nil
}

// listDir lists dir's entries but the lock file.
func listDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("assess: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != runlock.FileName {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// writeOrCompare writes b to path, or on resume checks that path holds b already (what says
// whether the assessment on disk is this one).
func writeOrCompare(files *safefile.Files, path string, b []byte, resume bool, what string) error {
	if resume {
		had, err := safefile.ReadNoFollow(path, safefile.RunRecord)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("assess: %w", err)
		}
		if err == nil {
			if !bytes.Equal(had, b) {
				return fmt.Errorf("assess: -resume: %s is not %s of this run (%s): not continuing another assessment; %s",
					path, what, firstDiff(had, b), "run it with its own deployment, flags and -shard, or name a new -out")
			}
			return nil
		}
	}
	if err := files.WriteFileAtomic(path, b); err != nil {
		return fmt.Errorf("assess: %w", err)
	}
	return nil
}

// firstDiff names the first line where a and b differ.
func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q on disk, %q now", i+1, strings.TrimSpace(x), strings.TrimSpace(y))
		}
	}
	return "same lines"
}

// resumePoint reads results.jsonl and returns how many units of the plan it holds, in order and
// whole. A cut last line, and the rows of a unit that was being appended, are removed (the file is
// rewritten atomically without them); rows that are not the plan's are an error.
func resumePoint(files *safefile.Files, path string, units []unit) (int, error) {
	lines, torn, err := readResults(path)
	if err != nil {
		return 0, err
	}
	done, used := 0, 0
	for _, u := range units {
		if used == len(lines) {
			break
		}
		n := u.rows
		whole := true
		for i := 0; i < n; i++ {
			if used+i >= len(lines) {
				whole = false
				break
			}
			r := lines[used+i].row
			if r.Setting != u.Setting || r.Attack != u.attack.Name() || r.Batch != u.Batch || r.Pos != i {
				return 0, fmt.Errorf("assess: -resume: %s line %d is not the next row of this assessment's plan (%s, %s, batch %d, prompt %d): it was written by another deployment or shard",
					path, used+i+1, u.Setting.Name, u.attack.Name(), u.Batch, i)
			}
		}
		if !whole {
			break
		}
		used += n
		done++
	}
	if used < len(lines) && done == len(units) {
		return 0, fmt.Errorf("assess: -resume: %s holds %d rows beyond this assessment's plan", path, len(lines)-used)
	}
	if torn >= 0 || used < len(lines) {
		var keep bytes.Buffer
		for _, l := range lines[:used] {
			keep.Write(l.line)
			keep.WriteByte('\n')
		}
		if err := files.WriteFileAtomic(path, keep.Bytes()); err != nil {
			return 0, fmt.Errorf("assess: -resume: %w", err)
		}
	}
	return done, nil
}

// progress prints a line per batch with the overall ETA, at most every few seconds.
type progress struct {
	w           io.Writer
	total, done int
	startDone   int
	start, last time.Time
}

// progressEvery is the least time between two progress lines (the last one always prints).
const progressEvery = 2 * time.Second

func newProgress(w io.Writer, total, done int) *progress {
	p := &progress{w: w, total: total, done: done, startDone: done, start: time.Now()}
	if w != nil && done > 0 {
		fmt.Fprintf(w, "assess: resuming: %d of %d batches already in results.jsonl\n", done, total)
	}
	return p
}

func (p *progress) batch(u unit, rows []Row, secs float64) {
	p.done++
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < progressEvery && p.done < p.total {
		return
	}
	p.last = now
	succ := 0
	for _, r := range rows {
		if r.Success {
			succ++
		}
	}
	el := now.Sub(p.start)
	eta := "-"
	if ran := p.done - p.startDone; ran > 0 {
		eta = (time.Duration(float64(el) / float64(ran) * float64(p.total-p.done))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "assess: %d/%d batches (%.1f%%): %s, %s, batch %d: %d/%d (%.1f s); elapsed %s, ETA %s\n",
		p.done, p.total, 100*float64(p.done)/float64(max(1, p.total)), u.Setting.Name, u.attack.Name(), u.Batch,
		succ, len(rows), secs, el.Round(time.Second), eta)
}

func (p *progress) finish() {
	if p.w != nil {
		fmt.Fprintf(p.w, "assess: done: %d batches (%d this run) in %s\n", p.total, p.total-p.startDone, time.Since(p.start).Round(time.Millisecond))
	}
}
