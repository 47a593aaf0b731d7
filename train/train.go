package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/tasks/lm"
)

// Run is everything one training run needs.
type Run struct {
	// Dir is the run directory: metrics.jsonl, checkpoints, report.json, report.md.
	Dir string
	// Options are the trainer's settings.
	Options Options
	// Task is the objective and model.
	Task tasks.Task
	// Sampler draws the examples.
	Sampler *gelo.Sampler
	// Metadata is stored in every checkpoint (the resolved config as JSON under "config").
	Metadata map[string]string
	// From is the checkpoint to resume from, already loaded and verified by the caller (see
	// checkpoints.LoadLatestGood); Train restores it (checkpoints.Restore) and never reads a
	// checkpoint itself. nil starts afresh.
	From *checkpoints.Checkpoint
	// Seed is the run's base seed (the config's seed key). Every checkpoint records it as
	// State.Seed, beside the best evaluation so far (State.Best, State.BestStep: the highest val
	// pos_mass or unmix_mass; see bestEval); a resume refuses a checkpoint of another seed.
	Seed uint64
	// Progress receives the human-readable progress (a bar on a terminal, plain lines otherwise).
	Progress io.Writer
}

// AdamEps is AdamW's epsilon in every run (PyTorch's default; not a config key).
const AdamEps = 1e-8

// ErrInterrupted reports that the run stopped on a signal after writing a checkpoint.
var ErrInterrupted = errors.New("interrupted")

// Result is what a finished (or interrupted) run reports.
type Result struct {
	// Steps is the number of optimizer steps done.
	Steps int64
	// Final holds the last evaluation, per split ("train", "val").
	Final map[string]map[string]float64
}

// Train runs r to completion, to an interrupt (ctx cancelled: checkpoint, then ErrInterrupted) or
// to an error. A NaN or Inf in the loss or a gradient stops the run with an error naming the step
// and the tensor, without writing a checkpoint, so the last good one stays the latest.
func Train(ctx context.Context, r Run) (Result, error) {
	o := r.Options
	j := job{
		params: r.Task.Params(),
		unit:   "rows",
		open: func(start int64) (func(int64) (float64, int64, error), func(), error) {
			pctx, cancelPipe := context.WithCancel(context.Background())
			// The pipeline already generates Prefetch batches ahead on Workers goroutines while
			// the step runs; device mixing takes each example's GEMM out of that generation.
			opts := []gelo.PipelineOption{gelo.PadTo(o.Bucket(r.Sampler.Config()))}
			if mixOnDevice(r) {
				opts = append(opts, gelo.MixOnDevice())
			}
			pipe := gelo.NewPipeline(pctx, r.Sampler, data.Train, o.BatchSize, o.Workers, o.Prefetch, start, opts...)
			step := func(step int64) (float64, int64, error) {
				b, err := pipe.Next()
				if err != nil {
					return 0, 0, fmt.Errorf("data: %w", err)
				}
				l, err := r.Task.Step(b, step)
				var rows int64
				for _, m := range b.Mask {
					if m {
						rows++
					}
				}
				return l, rows, err
			}
			return step, func() { pipe.Close(); cancelPipe() }, nil
		},
		evaluate: func(ctx context.Context) (map[string]map[string]float64, error) { return evaluate(ctx, r) },
	}
	return loop(ctx, r.common(), j)
}

// LMRun is everything one language-model training run needs (task lm).
type LMRun struct {
	// Dir is the run directory: metrics.jsonl, checkpoints, report.json, report.md.
	Dir string
	// Options are the trainer's settings (batch_size counts windows of the stream).
	Options Options
	// Task is the decoder and its token stream.
	Task *lm.Task
	// Metadata, From, Seed and Progress are as in Run.
	Metadata map[string]string
	From     *checkpoints.Checkpoint
	Seed     uint64
	Progress io.Writer
	// ResumeRecord, when not nil and the run resumes, is written to metrics.jsonl as one record
	// with the step resumed from, before the first resumed step: what the caller accepted
	// (runner: the inputs that changed since the checkpoint, under -accept-changed-inputs).
	ResumeRecord map[string]any
}

// TrainLM runs a language-model run as Train runs an attack: the same schedule, clipping,
// checkpoints, exact resume and metrics.jsonl; each step's windows depend on (seed, step) alone.
func TrainLM(ctx context.Context, r LMRun) (Result, error) {
	j := job{
		params: r.Task.Params(),
		unit:   "tokens",
		open: func(int64) (func(int64) (float64, int64, error), func(), error) {
			return r.Task.Step, func() {}, nil
		},
		evaluate: func(ctx context.Context) (map[string]map[string]float64, error) { return r.Task.Evaluate(ctx) },
	}
	return loop(ctx, settings{Dir: r.Dir, Options: r.Options, Metadata: r.Metadata, From: r.From, Seed: r.Seed, Progress: r.Progress,
		ResumeRecord: r.ResumeRecord}, j)
}

// settings are what every run gives the loop besides its job.
type settings struct {
	Dir      string
	Options  Options
	Metadata map[string]string
	From     *checkpoints.Checkpoint
	Seed     uint64
	Progress io.Writer
	// ResumeRecord is LMRun.ResumeRecord.
	ResumeRecord map[string]any
}

func (r Run) common() settings {
	return settings{Dir: r.Dir, Options: r.Options, Metadata: r.Metadata, From: r.From, Seed: r.Seed, Progress: r.Progress}
}

// job is what the loop drives: an attack over the sampler's batches, or a language model over a
// token stream.
type job struct {
	params *engine.Params
	// unit names what a step's count counts, for the progress rate ("rows", "tokens").
	unit string
	// open starts the data at step start; the step function runs one step's forward and
	// backward (gradients accumulated into params) and returns the loss and the units seen.
	open func(start int64) (step func(step int64) (float64, int64, error), closeFn func(), err error)
	// evaluate scores both splits (forward only).
	evaluate func(ctx context.Context) (map[string]map[string]float64, error)
}

// loop is the training loop shared by every task.
func loop(ctx context.Context, r settings, j job) (Result, error) {
	o := r.Options
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("run dir: %w", err)
	}
	ps := j.params
	opt, err := engine.NewAdamW(ps, engine.AdamWConfig{
		LR: float32(o.LR), Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: AdamEps, WeightDecay: float32(o.WeightDecay),
	})
	if err != nil {
		return Result{}, err
	}
	be := ps.Data().Storage().Backend()
	sched := Schedule{Peak: o.LR, Warmup: o.WarmupSteps, Total: o.Steps, MinFrac: o.MinLRFrac}
	opt.SetSchedule(func(step int) float32 { return float32(sched.At(step)) })

	start := int64(0)
	keep := int64(-1)
	// win is the loss window of the current log interval; it is saved in checkpoints so that a
	// run resumed between two log steps logs the same mean loss as an uninterrupted one.
	var win lossWindow
	// best is the best evaluation so far (see bestEval); it is saved in checkpoints so that a
	// resumed run keeps the one it found before the interruption.
	var best bestEval
	if r.From != nil {
		ck := r.From
		if err := checkpoints.Restore(*ck, ps, opt); err != nil {
			return Result{}, fmt.Errorf("resume: %w", err)
		}
		// Checkpoints written before the seed was recorded hold 0: nothing to compare then.
		if ck.State.Seed != 0 && ck.State.Seed != r.Seed {
			return Result{}, fmt.Errorf("resume %s: the checkpoint was written by a run with seed %d, this run has seed %d", ck.Path, ck.State.Seed, r.Seed)
		}
		if err := checkResumeState(*ck); err != nil {
			return Result{}, err
		}
		start, keep = ck.State.Step, ck.State.Step
		win = lossWindow{sum: ck.State.Last[stateLossSum], n: int(ck.State.Last[stateLossN])}
		if len(ck.State.Best) > 0 {
			best = bestEval{step: ck.State.BestStep, metrics: ck.State.Best}
		}
		fmt.Fprintf(r.Progress, "resuming %s at step %d\n", ck.Path, start)
	}
	mlog, notes, err := openMetricsLog(filepath.Join(r.Dir, "metrics.jsonl"), keep)
	if err != nil {
		return Result{}, err
	}
	for _, n := range notes {
		fmt.Fprintf(r.Progress, "resume: warning: %s\n", n)
	}
	defer mlog.close()
	if r.From != nil && r.ResumeRecord != nil {
		rec := map[string]any{"step": start}
		for k, v := range r.ResumeRecord {
			if k != "step" {
				rec[k] = v
			}
		}
		if err := mlog.write(rec); err != nil {
			return Result{}, err
		}
	}

	res := Result{Steps: start}
	if start >= int64(o.Steps) {
		fmt.Fprintf(r.Progress, "run already complete at step %d\n", start)
		res.Final, err = j.evaluate(ctx)
		return res, err
	}

	stepFn, closeData, err := j.open(start)
	if err != nil {
		return res, err
	}
	defer closeData()

	prog := newProgress(r.Progress, int64(o.Steps), start, j.unit)
	var units int64
	for step := start; step < int64(o.Steps); step++ {
		if ctx.Err() != nil {
			if err := saveCheckpoint(r, ps, opt, step, win, best); err != nil {
				return res, fmt.Errorf("checkpoint on interrupt: %w", err)
			}
			prog.finish()
			// The command that resumes depends on the caller (train -resume, or the same sweep
			// command again): the caller's error says it.
			fmt.Fprintf(r.Progress, "interrupted at step %d; checkpoint written\n", step)
			return res, ErrInterrupted
		}
		var l float64
		var n int64
		err := engine.RecordStep(be, func() (err error) { l, n, err = stepFn(step); return err })
		if err != nil {
			return res, fmt.Errorf("step %d: %w", step+1, err)
		}
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return res, fmt.Errorf("step %d: loss is %v (last good checkpoint kept)", step+1, l)
		}
		gnorm := math.NaN()
		if o.GradClip > 0 {
			gnorm = engine.ClipGradNorm(ps, float32(o.GradClip))
		}
		if err := engine.CheckFinite(ps); err != nil {
			return res, fmt.Errorf("step %d: %w (last good checkpoint kept)", step+1, err)
		}
		opt.Step()
		ps.ZeroGrad()
		// A device whose kernels can fail (CUDA: a launch, out of memory) keeps the first error
		// instead of returning it: stop at the step that raised it, before it is logged or
		// checkpointed. This does not wait for the queued AdamW kernels (the next step's loss
		// does, and saveCheckpoint syncs before it writes).
		if err := engine.BackendErr(be); err != nil {
			return res, fmt.Errorf("step %d: device error: %w (last good checkpoint kept)", step+1, err)
		}

		done := step + 1
		res.Steps = done
		win.sum += l
		win.n++
		units += n
		prog.step(done, l, units)
		if done%int64(o.LogEvery) == 0 || done == int64(o.Steps) {
			rec := map[string]any{"step": done, "split": "train", "loss": win.mean(), "lr": float64(opt.LR())}
			if !math.IsNaN(gnorm) {
				rec["grad_norm"] = gnorm
			}
			if err := mlog.write(rec); err != nil {
				return res, err
			}
			prog.line(done, win.mean(), float64(opt.LR()))
			win = lossWindow{}
		}
		if done%int64(o.EvalEvery) == 0 || done == int64(o.Steps) {
			// Evaluation runs to its end even when an interrupt arrives meanwhile (it is a few
			// batches): its lines belong to this step, and the interrupt is honoured at the next
			// step boundary with a checkpoint, so a resumed run writes exactly the same lines.
			final, err := j.evaluate(context.WithoutCancel(ctx))
			if err != nil {
				return res, fmt.Errorf("step %d: eval: %w", done, err)
			}
			res.Final = final
			best.offer(done, final)
			for _, split := range []string{"train", "val"} {
				rec := map[string]any{"step": done, "eval": split}
				for k, v := range final[split] {
					rec[k] = v
				}
				if err := mlog.write(rec); err != nil {
					return res, err
				}
			}
			prog.eval(done, final)
		}
		if done%int64(o.CkptEvery) == 0 || done == int64(o.Steps) {
			if err := saveCheckpoint(r, ps, opt, done, win, best); err != nil {
				return res, fmt.Errorf("step %d: checkpoint: %w", done, err)
			}
		}
	}
	prog.finish()
	return res, nil
}

// checkResumeState refuses a checkpoint whose resume state this loop cannot have written, even
// though its checksums hold (a resealed file): the loop draws one batch per step and saves
// next_batch equal to step, and the best evaluation is one of the steps done.
func checkResumeState(ck checkpoints.Checkpoint) error {
	st := ck.State
	if st.NextBatch != st.Step {
		return fmt.Errorf("resume %s: geloattack.next_batch is %d at geloattack.step %d; the trainer draws one batch per step and records them equal: damaged or forged",
			ck.Path, st.NextBatch, st.Step)
	}
	if st.BestStep < 0 || st.BestStep > st.Step {
		return fmt.Errorf("resume %s: geloattack.best_step is %d, outside the %d steps done (geloattack.step): damaged or forged",
			ck.Path, st.BestStep, st.Step)
	}
	return nil
}

// evaluate is the periodic evaluation of a run (tasks.Evaluate with the run's batch settings,
// U formed where training forms it).
func evaluate(ctx context.Context, r Run) (map[string]map[string]float64, error) {
	o := r.Options
	return tasks.Evaluate(ctx, r.Sampler, r.Task, tasks.EvalSpec{BatchSize: o.BatchSize, Batches: o.EvalBatches, Workers: o.Workers, Prefetch: o.Prefetch,
		Bucket: o.Bucket(r.Sampler.Config()), MixOnDevice: mixOnDevice(r)})
}

// mixOnDevice resolves the run's mix_on against its model's backend (tasks.MixOnDevice).
func mixOnDevice(r Run) bool {
	return tasks.MixOnDevice(r.Options, r.Task.Params().Data().Storage().Backend())
}

// Keys of checkpoints.State.Last holding the loss window of the unfinished log interval.
const (
	stateLossSum = "train.loss_window_sum"
	stateLossN   = "train.loss_window_n"
)

// lossWindow accumulates the step losses of one log interval.
type lossWindow struct {
	sum float64
	n   int
}

func (w lossWindow) mean() float64 { return w.sum / float64(w.n) }

// bestEval is the best evaluation of a run so far: the one with the highest val primary metric
// (see eval.PrimaryMetrics: pos_mass for retrieval, unmix_mass for unmix), the earliest among equals. Checkpoints record it as State.BestStep (the
// steps done at that evaluation) and State.Best (all its figures keyed "<split>.<metric>", e.g.
// "val.pos_mass", "train.pos_mass_chance"); a NaN never counts, and a run without an evaluation
// that reports a primary metric records none (BestStep 0, Best empty).
type bestEval struct {
	step    int64
	metrics map[string]float64
}

// offer makes the evaluation at step the best if its val primary metric beats the best so far.
func (b *bestEval) offer(step int64, final map[string]map[string]float64) {
	for _, key := range eval.PrimaryMetrics {
		v, ok := final["val"][key]
		if !ok {
			continue
		}
		if math.IsNaN(v) {
			return
		}
		if prev, ok := b.metrics["val."+key]; ok && !(v > prev) {
			return
		}
		flat := map[string]float64{}
		for split, ms := range final {
			for k, x := range ms {
				flat[split+"."+k] = x
			}
		}
		*b = bestEval{step: step, metrics: flat}
		return
	}
}

// saveCheckpoint writes weights, optimizer state, the run's seed, the best evaluation so far and
// the loss window for `steps` steps done and prunes old checkpoints.
func saveCheckpoint(r settings, ps *engine.Params, opt *engine.AdamW, steps int64, win lossWindow, best bestEval) error {
	st := opt.State()
	var weights, m, v []checkpoints.Tensor
	for _, pv := range ps.Views() {
		weights = append(weights, checkpoints.Tensor{Name: pv.Name, Shape: pv.Shape, Data: pv.Tensor.ToHost()})
		m = append(m, checkpoints.Tensor{Name: pv.Name, Shape: pv.Shape, Data: st.M[pv.Name]})
		v = append(v, checkpoints.Tensor{Name: pv.Name, Shape: pv.Shape, Data: st.V[pv.Name]})
	}
	// An asynchronous device reports a failed kernel (an update, a download) only when asked:
	// never write weights that a failure may have corrupted.
	if err := engine.Sync(ps.Data().Storage().Backend()); err != nil {
		return fmt.Errorf("device error before writing checkpoint %d: %w", steps, err)
	}
	state := checkpoints.State{Step: steps, NextBatch: steps, Seed: r.Seed, AdamM: m, AdamV: v,
		BestStep: best.step, Best: best.metrics,
		Last: map[string]float64{stateLossSum: win.sum, stateLossN: float64(win.n)}}
	if err := checkpoints.SaveCheckpoint(r.Dir, steps, weights, state, r.Metadata); err != nil {
		return err
	}
	_, err := checkpoints.Prune(r.Dir, r.Options.KeepCkpts)
	return err
}

// WriteReport writes report.json and report.md for the final evaluation of a run.
func WriteReport(dir string, title string, res Result) error {
	b, err := json.MarshalIndent(map[string]any{"steps": res.Steps, "final": res.Final}, "", "  ")
	if err != nil {
		return err
	}
	if err := checkpoints.WriteFileAtomic(filepath.Join(dir, "report.json"), append(b, '\n')); err != nil {
		return err
	}
	md := fmt.Sprintf("# %s\n\nSteps: %d\n\n%s", title, res.Steps, eval.MetricsMarkdown(res.Final))
	return checkpoints.WriteFileAtomic(filepath.Join(dir, "report.md"), []byte(md))
}
