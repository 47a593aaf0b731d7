// Package runner turns a resolved run config into a running attack: it opens the store (or builds
// the synthetic one), the sampler, the model and its task, and runs training or evaluation in a run
// directory. The CLI and sweeps share it.
package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/synth"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/internal/runlock"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/models/settransformer/modelcfg"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/train"
)

// MetaRunConfig is the checkpoint metadata key of the whole resolved run config (JSON). SPEC §4's
// "config" key holds the model config alone; this one lets `eval` rebuild the store and sampler
// from a checkpoint.
const MetaRunConfig = "run_config"

// MetaDevice is the checkpoint metadata key of the backend that computed the steps up to the
// checkpoint: its Name(), e.g. "cpu (2 workers; OpenBLAS ...)" or "cuda:0 NVIDIA H100 ...;
// precision bf16". Informational: a run may resume on another device.
const MetaDevice = "device"

// Session is everything a resolved config builds.
type Session struct {
	// Cfg is the config with the model's widths filled in from the store.
	Cfg     config.Run
	Corpus  data.Corpus
	Sampler *gelo.Sampler
	Task    tasks.Task
	// Backend is the device the model lives on, opened from Cfg.Device and Cfg.Precision.
	Backend engine.Backend
	// DeviceLog holds the lines the device choice logged: the device opened (its backend's name),
	// or a fallback to the CPU and why, and a precision the CPU ignores; and a pre-flight warning.
	DeviceLog []string
	// Estimate is the resource pre-flight's estimate of what the run needs.
	Estimate Estimate
	close    func() error
}

// OpenCorpus opens the configured store, or generates the embedded synthetic one.
func OpenCorpus(cfg config.Run) (data.Corpus, func() error, error) {
	if cfg.Store.Path != "" {
		s, err := store.Open(ExpandPath(cfg.Store.Path))
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	c, err := synth.Generate(cfg.Store.Synth)
	if err != nil {
		return nil, nil, fmt.Errorf("synthetic store: %w", err)
	}
	return c, func() error { return nil }, nil
}

// configName names the config a run was made from, for errors found once the store is open.
func configName(cfg config.Run) string {
	if cfg.Source != "" {
		return "config " + cfg.Source
	}
	return "config"
}

// storeBytes is the size of the files of a store directory (0 when unreadable: informational).
func storeBytes(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// ExpandPath expands $VARS and a leading ~/ in a path from a config, so shipped configs can name
// stores in the user's cache ($GELOATTACK_CACHE/stores/...). $GELOATTACK_CACHE unset stands for
// the cache the fetch scripts and the extraction use by default (corpus.DefaultCacheDir).
func ExpandPath(p string) string {
	p = os.Expand(p, func(name string) string {
		if v := os.Getenv(name); v != "" || name != corpus.EnvCache {
			return v
		}
		if d, err := corpus.DefaultCacheDir(); err == nil {
			return d
		}
		return ""
	})
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// Open builds the corpus, sampler and model of cfg on the device of cfg.Device and cfg.Precision
// (see package engine/device); what the device choice logged (the device opened, or why auto fell
// back to the CPU) is in Session.DeviceLog, for the caller to print once the session is known to
// open. The model's input and candidate widths come from the store when the config leaves them at
// 0, and must match it otherwise.
//
// Before the synthetic store is generated or the model built, the resource pre-flight
// (EstimateRun) compares what the config needs with the host memory available and, on a GPU, the
// device's free memory, and refuses with the estimate when it does not fit; its lines (a warning
// when GELOATTACK_SKIP_PREFLIGHT is set) join DeviceLog.
func Open(cfg config.Run) (*Session, error) {
	return OpenContext(context.Background(), cfg)
}

// OpenContext is Open whose generation of the synthetic store stops when ctx is cancelled.
func OpenContext(ctx context.Context, cfg config.Run) (*Session, error) {
	var lines []string
	// A store on disk is mapped, not read: opening it first is cheap and gives d and e.
	var disk *store.Store
	if cfg.Store.Path != "" {
		var err error
		if disk, err = store.Open(ExpandPath(cfg.Store.Path)); err != nil {
			return nil, err
		}
		lines = append(lines, disk.Notes()...)
	}
	closeDisk := func() {
		if disk != nil {
			disk.Close()
		}
	}
	d, e, mapped := cfg.Store.Synth.WithDefaults().D, cfg.Store.Synth.WithDefaults().E, int64(0)
	what := configName(cfg) + " (embedded synthetic store)"
	if disk != nil {
		d, e, mapped = disk.D(), disk.E(), storeBytes(disk.Dir())
		what = configName(cfg) + " on store " + cfg.Store.Path
	}
	be, err := device.Open(cfg.Device, cfg.Precision, func(l string) { lines = append(lines, l) })
	if err != nil {
		closeDisk()
		return nil, err
	}
	memInfo, onDevice := be.(interface{ MemInfo() (int64, int64, error) })
	est, err := EstimateRun(cfg, d, e, mapped, onDevice)
	if err == nil {
		var warn string
		if warn, err = est.CheckHost(what); warn != "" {
			lines = append(lines, warn)
		}
		if err == nil && onDevice {
			if free, _, merr := memInfo.MemInfo(); merr == nil {
				if warn, err = est.CheckDevice(what, be.Name(), free); warn != "" {
					lines = append(lines, warn)
				}
			}
		}
	}
	if err != nil {
		closeDisk()
		device.Close(be)
		return nil, err
	}
	var corpus data.Corpus = disk
	closeCorpus := func() error { return nil }
	if disk != nil {
		closeCorpus = disk.Close
	} else if corpus, err = synth.GenerateContext(ctx, cfg.Store.Synth); err != nil {
		device.Close(be)
		return nil, fmt.Errorf("synthetic store: %w", err)
	}
	closeFn := func() error {
		err := closeCorpus()
		device.Close(be)
		return err
	}
	fail := func(err error) (*Session, error) {
		closeFn()
		return nil, err
	}
	m := &cfg.Model
	if m.InputDim == 0 {
		m.InputDim = corpus.D()
	}
	if m.CandidateDim == 0 {
		m.CandidateDim = corpus.E()
	}
	if m.InputDim != corpus.D() {
		return fail(fmt.Errorf("model.input_dim = %d but the store's rows have d = %d", m.InputDim, corpus.D()))
	}
	if m.Task == settransformer.TaskRetrieval && m.CandidateDim != corpus.E() {
		return fail(fmt.Errorf("model.candidate_dim = %d but the store's text embeddings have e = %d", m.CandidateDim, corpus.E()))
	}
	sampler, err := gelo.NewSampler(corpus, cfg.Sampler)
	if err != nil {
		// Only the store can say a sampler setting is impossible (more positives than texts):
		// name the config and the keys, since the config is where it is fixed.
		return fail(fmt.Errorf("%s: sampler.positives %s (sampler.tokens_per_text %s, sampler.val_frac %g) does not fit this store: %w",
			configName(cfg), cfg.Sampler.Positives, cfg.Sampler.TokensPerText, cfg.Sampler.ValFrac, err))
	}
	s := &Session{Cfg: cfg, Corpus: corpus, Sampler: sampler, Backend: be, DeviceLog: lines, Estimate: est, close: closeFn}
	s.Task, err = newTask(be, cfg, sampler)
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// newTask builds the model of cfg.Model.Task on be and its training objective.
func newTask(be engine.Backend, cfg config.Run, sampler *gelo.Sampler) (tasks.Task, error) {
	switch cfg.Model.Task {
	case settransformer.TaskRetrieval:
		model, err := settransformer.New(be, cfg.Model, cfg.Seed)
		if err != nil {
			return nil, err
		}
		return tasks.NewRetrieval(model, sampler, cfg.Loss.ExtraNegatives, cfg.Seed), nil
	case settransformer.TaskUnmix:
		ev := tasks.UnmixEvalConfig{K: cfg.Eval.PoolK, Tau: cfg.Eval.Tau}
		return tasks.NewUnmix(be, cfg.Model, cfg.Loss.Unmix, sampler, ev, cfg.Seed)
	}
	return nil, fmt.Errorf("model.task %q is not supported by this build", cfg.Model.Task)
}

// Close releases the store and the device; the model's tensors must not be used afterwards.
func (s *Session) Close() error { return s.close() }

// Metadata is what every checkpoint of the session carries.
func (s *Session) Metadata() (map[string]string, error) {
	return runMetadata(s.Cfg.Model, s.Cfg, s.Backend)
}

// runMetadata is the checkpoint metadata of a run of cfg on be whose model's config is model: the
// model config under checkpoints.MetaConfig, the whole run config and the device's name.
func runMetadata(model any, cfg config.Run, be engine.Backend) (map[string]string, error) {
	m, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	run, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return map[string]string{checkpoints.MetaConfig: string(m), MetaRunConfig: string(run), MetaDevice: be.Name()}, nil
}

// Describe is a one-line summary of the session for logs.
func (s *Session) Describe() string {
	src := "embedded synthetic store"
	if s.Cfg.Store.Path != "" {
		src = "store " + s.Cfg.Store.Path
	}
	return fmt.Sprintf("%s, %d texts (d=%d, e=%d), model %s with %d parameters, %d steps of %d examples",
		src, s.Corpus.NumTexts(), s.Corpus.D(), s.Corpus.E(), s.Cfg.Model.Task, s.Task.Params().Len(),
		s.Cfg.Train.Steps, s.Cfg.Train.BatchSize)
}

// ErrRunExists reports a run directory that already holds checkpoints when no resume was asked for.
var ErrRunExists = errors.New("run directory already holds checkpoints")

// Train runs cfg in dir. With resume it continues from dir's latest checkpoint, which must have
// been made with the same config (train.steps, workers, prefetch, device and precision may differ:
// the new ones are recorded); without, it refuses a directory that already holds checkpoints. It
// writes config.yaml once the run is known to be consistent, and report.{json,md} at the end. The
// progress header names the run and the device (the backend's name, also recorded in every
// checkpoint under MetaDevice). An interrupt (ctx cancelled) returns train.ErrInterrupted after a
// checkpoint.
//
// Train holds dir's lock (package internal/runlock) for the whole run: a second writer of the same
// directory is refused with an error naming the holder, and a lock left by a killed run is taken
// over with a line saying so.
func Train(ctx context.Context, cfg config.Run, dir string, resume bool, progress io.Writer) (train.Result, error) {
	return TrainWith(ctx, cfg, dir, RunOptions{Resume: resume}, progress)
}

// RunOptions say how a run starts in its directory.
type RunOptions struct {
	// Resume continues from the directory's newest good checkpoint (see Train).
	Resume bool
	// AcceptChangedInputs lets a resumed task-lm run continue when its texts or tokenizer differ
	// from the digests its checkpoint recorded (otherwise refused): the run header says which
	// changed, and metrics.jsonl gets a record {"event": "accept_changed_inputs", ...} at the
	// step it resumes from. Without Resume it is an error.
	AcceptChangedInputs bool
}

// TrainWith is Train with its options.
func TrainWith(ctx context.Context, cfg config.Run, dir string, o RunOptions, progress io.Writer) (train.Result, error) {
	if o.AcceptChangedInputs && !o.Resume {
		return train.Result{}, errors.New("accepting changed inputs applies to a resumed run (-resume)")
	}
	if progress == nil {
		progress = io.Discard
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	lock, err := runlock.Acquire(dir)
	if err != nil {
		return train.Result{}, fmt.Errorf("run directory %w", err)
	}
	if lock.Stale != "" {
		fmt.Fprintf(progress, "run %s: %s\n", dir, lock.Stale)
	}
	res, err := trainLocked(ctx, cfg, dir, o, progress)
	if err != nil && created {
		// A run refused before it wrote anything (a config that does not fit, a bad store)
		// leaves no directory behind: the next attempt then gets the same name. Removed while
		// the lock is held, so no other writer can be starting in it.
		removeIfOnlyLock(dir)
	}
	lock.Release()
	return res, err
}

// removeIfOnlyLock removes dir when the lock file is all it holds.
func removeIfOnlyLock(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != runlock.FileName {
		return
	}
	if os.Remove(filepath.Join(dir, runlock.FileName)) == nil {
		os.Remove(dir)
	}
}

// TrainLocked is Train for a caller that already holds dir's lock (a sweep locks a cell before it
// inspects it, so the state it reads is not changing under it).
func TrainLocked(ctx context.Context, cfg config.Run, dir string, resume bool, progress io.Writer) (train.Result, error) {
	return trainLocked(ctx, cfg, dir, RunOptions{Resume: resume}, progress)
}

func trainLocked(ctx context.Context, cfg config.Run, dir string, o RunOptions, progress io.Writer) (train.Result, error) {
	resume := o.Resume
	if progress == nil {
		progress = io.Discard
	}
	if err := CheckRunDir(dir); err != nil {
		return train.Result{}, err
	}
	precNote := ""
	var from *checkpoints.Checkpoint
	if !resume {
		// Any checkpoint, or a latest pointer that cannot be read, means the directory holds a
		// run: never train over it without -resume.
		if _, _, err := checkpoints.LatestPath(dir); !errors.Is(err, fs.ErrNotExist) {
			return train.Result{}, fmt.Errorf("%s: %w: add -resume to continue it, or choose another directory", dir, ErrRunExists)
		}
	} else {
		// The newest checkpoint that loads and verifies; damaged newer ones are named and
		// skipped (they are overwritten as the run passes their steps again). This is the only
		// read of it: its config is compared here, and train.Train restores it (Run.From).
		ck, skipped, err := checkpoints.LoadLatestGood(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return train.Result{}, fmt.Errorf("resume: run directory %s has no checkpoint to resume from", dir)
		}
		if err != nil {
			return train.Result{}, fmt.Errorf("resume: %w", err)
		}
		for _, s := range skipped {
			fmt.Fprintf(progress, "resume: skipping damaged checkpoint %s\n", s)
		}
		for _, n := range ck.Notes {
			fmt.Fprintf(progress, "resume: note: %s\n", n)
		}
		from = &ck
		had, err := ConfigOf(ck)
		if err != nil {
			return train.Result{}, fmt.Errorf("resume: %w", err)
		}
		want := cfg
		want.Train.Steps = had.Train.Steps
		want.Precision = had.Precision
		if d := config.Diff(had, want); d != "" {
			return train.Result{}, fmt.Errorf("resume %s: the run was made with another config (%s); resume with its own config (%s) or start a new run",
				dir, d, filepath.Join(dir, "config.yaml"))
		}
		note, err := checkBelongs(dir, ck, had)
		if err != nil {
			return train.Result{}, err
		}
		if note != "" {
			fmt.Fprintf(progress, "resume: note: %s\n", note)
		}
		if had.Precision != cfg.Precision {
			precNote = fmt.Sprintf("precision %s -> %s: the run continues in %s", had.Precision, cfg.Precision, cfg.Precision)
		}
	}
	// The CUDA driver's current context is per OS thread: keep the goroutine that drives the
	// device on one thread for the whole run (a no-op cost on the CPU).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cfg.Model.Task == modelcfg.TaskLM {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return train.Result{}, err
		}
		return trainLM(ctx, cfg, dir, from, o, progress)
	}
	sess, err := OpenContext(ctx, cfg)
	if err != nil {
		return train.Result{}, err
	}
	defer sess.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return train.Result{}, err
	}
	if err := recordRun(dir, sess.Cfg, sess.Task.Params(), from); err != nil {
		return train.Result{}, err
	}
	meta, err := sess.Metadata()
	if err != nil {
		return train.Result{}, err
	}
	fmt.Fprintf(progress, "run %s: %s\n", dir, sess.Describe())
	for _, l := range sess.DeviceLog {
		fmt.Fprintf(progress, "  %s\n", l)
	}
	fmt.Fprintf(progress, "  memory: about %s on the host%s (%s)\n", bytesText(sess.Estimate.Host()), deviceNeed(sess.Estimate), sess.Estimate)
	where := map[bool]string{true: "the model's device", false: "the host (the sampler's workers)"}[tasks.MixOnDevice(sess.Cfg.Train, sess.Task.Params().Data().Storage().Backend())]
	fmt.Fprintf(progress, "  mixing: U = A X formed on %s (train.mix_on %s)\n", where, cmp.Or(sess.Cfg.Train.MixOn, "auto"))
	if precNote != "" {
		fmt.Fprintf(progress, "  resume: %s\n", precNote)
	}
	if o.AcceptChangedInputs {
		fmt.Fprintf(progress, "  resume: -accept-changed-inputs: task %s records no digests of its inputs; nothing to accept\n", sess.Cfg.Model.Task)
	}
	res, err := train.Train(ctx, train.Run{
		Dir: dir, Options: sess.Cfg.Train, Task: sess.Task, Sampler: sess.Sampler,
		Metadata: meta, From: from, Progress: progress,
		Seed: sess.Cfg.Seed,
	})
	if err != nil {
		return res, err
	}
	return res, train.WriteReport(dir, "geloattack run "+sess.Cfg.Name, res)
}

// deviceNeed is ", X on the device" for a GPU estimate.
func deviceNeed(e Estimate) string {
	if !e.OnDevice {
		return ""
	}
	return ", " + bytesText(e.Device()) + " on the device"
}

// ResumeConfig is the run config of the run in dir, for a resume that names no config: the
// config its newest good checkpoint recorded. A directory whose lock another process holds is
// refused first, naming the holder (that run may not have written a checkpoint yet).
func ResumeConfig(dir string) (config.Run, error) {
	if h := runlock.Holder(dir); h != "" {
		return config.Run{}, fmt.Errorf("run directory %w", &runlock.HeldError{Dir: dir, Holder: h})
	}
	ck, _, err := checkpoints.LoadLatestGood(dir)
	if err != nil {
		return config.Run{}, fmt.Errorf("-resume: %w", err)
	}
	cfg, err := ConfigOf(ck)
	if err != nil {
		return config.Run{}, fmt.Errorf("-resume: %w", err)
	}
	return cfg, nil
}

// ConfigOf returns the run config stored in a checkpoint.
func ConfigOf(ck checkpoints.Checkpoint) (config.Run, error) {
	raw, ok := ck.Metadata[MetaRunConfig]
	if !ok {
		return config.Run{}, fmt.Errorf("checkpoint %s: no %q metadata: not written by geloattack train", ck.Path, MetaRunConfig)
	}
	// Strictly: a key this build does not know (a forged or resealed checkpoint, or one of
	// another tool) is refused by name rather than dropped, so the config compared on resume and
	// rebuilt by eval is all of what the checkpoint says.
	var cfg config.Run
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return config.Run{}, fmt.Errorf("checkpoint %s: %s metadata: %w", ck.Path, MetaRunConfig, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return config.Run{}, fmt.Errorf("checkpoint %s: %s metadata: data after the config object", ck.Path, MetaRunConfig)
	}
	if cfg.Precision == "" {
		// Written before the precision key existed: those runs computed in fp32.
		cfg.Precision = config.Default().Precision
	}
	if err := cfg.Validate(); err != nil {
		return config.Run{}, fmt.Errorf("checkpoint %s: run config: %w", ck.Path, err)
	}
	return cfg, nil
}

// LoadWeights copies a checkpoint's weights into the session's model (checkpoints.Restore without
// the optimizer state), checking every name and shape.
func (s *Session) LoadWeights(ck checkpoints.Checkpoint) error {
	return checkpoints.Restore(ck, s.Task.Params(), nil)
}
