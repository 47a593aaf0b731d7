package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/benchkit"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/train"
)

// The end-to-end benchmark's paper-size run: the paper model (h384 L24 H12, SwiGLU 1536) on sets of
// n = 4 positives x 58 window tokens + ceil(0.1 x 232) = 24 gaussian shields = 256 rows, B = 16
// sets a step (4096 rows), d = e = 4096 as the step benchmark, orthogonal mixing, every row
// observed. Unmix adds a 2-block decoder over S = n = 256 slots with the default unmix loss.
const (
	benchTrainPositives = 4
	benchTrainTokens    = 58
	benchTrainShield    = 0.1
	benchTrainBatch     = 16
	benchTrainWidth     = 4096
	benchTrainTexts     = 64 // of 64..96 tokens: a 160 MB float32 store, generated in memory
)

// BenchTrainOptions say what the end-to-end training benchmark runs.
type BenchTrainOptions struct {
	// Task is settransformer.TaskRetrieval or TaskUnmix.
	Task settransformer.Task
	// Preset is the model preset ("" = "paper"; "tiny" and "small" keep the paper-size data and
	// shrink only the model, for tests).
	Preset string
	// Steps is the number of timed steps; Warmup untimed steps run first (>= 1: the first step
	// sizes the arena and fills the prefetch queue).
	Steps, Warmup int
	// Device and Precision choose the backend as a run config's keys do (engine/device).
	Device, Precision string
	// Workers is the number of generator goroutines (train.workers); 0 means GOMAXPROCS on the
	// CPU and GOMAXPROCS/2 on a GPU (benchGPUWorkers).
	Workers int
	// Prefetch is the number of batches generated ahead (train.prefetch); 0 means 2 x Workers.
	Prefetch int
	// MixOn is train.mix_on ("" = the config's default, auto): where U = A X is formed.
	MixOn string
	// Log receives the device choice and the pre-flight lines (nil: discarded).
	Log io.Writer
}

// BenchTrainResult is what one end-to-end training benchmark measured.
type BenchTrainResult struct {
	Task     settransformer.Task
	Preset   string // the model preset
	Backend  string // the backend's Name()
	QR       string // the QR the generator draws A with (LAPACK or the scalar Go fallback)
	Params   int    // model parameters
	B, N, D  int    // sets a step, rows a set, row width
	Steps    int    // timed steps
	Warmup   int    // untimed steps before them
	Workers  int    // generator goroutines
	Prefetch int    // batches generated ahead
	Cores    int    // GOMAXPROCS
	MixOn    string // train.mix_on as configured (auto, host or device)

	// StepMedian is the median wall time from one step's start to the next's (pipeline wait,
	// forward, backward, clipping, finite check, AdamW, logging), StepMean its mean, StepMin
	// and StepMax its extremes: the spread says how noisy the machine was.
	StepMedian, StepMean, StepMin, StepMax time.Duration
	// TaskMedian is the median time inside the task's Step (forward and backward; on a GPU up
	// to the loss's download); OutsideMedian the median of the rest of a step (clipping,
	// AdamW, logging and waiting for the next batch).
	TaskMedian, OutsideMedian time.Duration
	// RowsPerSec is B*N / StepMedian: training throughput with generation included.
	RowsPerSec float64
	// GenPerExample is the median wall time of generating one example on one goroutine, measured
	// in the same process right before training (same sampler, same store).
	GenPerExample time.Duration
	// GenCoresNeeded is B * GenPerExample / StepMedian: the cores generation must have to keep up
	// with the step. GenShare is GenCoresNeeded / Cores: the share of the machine's cores that
	// generation takes (on the CPU it competes with the step for them).
	GenCoresNeeded, GenShare float64
	// CPUPerStep is the process CPU time (every thread: step, generators, BLAS) per timed step, and
	// CPURowsPerSec is B*N / (CPUPerStep / Cores): the end-to-end throughput this CPU work would
	// give with the cores to itself, the better estimate on a shared machine (spin-waiting BLAS
	// threads still inflate it under contention). Both are for the CPU backend; on a GPU
	// CPUPerStep is the host's share.
	CPUPerStep    time.Duration
	CPURowsPerSec float64
	// FirstLoss and LastLoss are the losses of the first and last timed steps.
	FirstLoss, LastLoss float64
}

// errBenchDone ends the benchmark's training run after its last timed step, before the run's
// final evaluation and checkpoint (which are not part of a step).
var errBenchDone = errors.New("benchmark steps done")

// benchTask wraps a tasks.Task to time train.Train's loop from inside: the start of each Step and
// its duration. At step stop it returns errBenchDone instead of stepping.
type benchTask struct {
	tasks.Task
	stop   int64
	starts []time.Time
	cpu    []time.Duration // process CPU time (all threads) at each start
	inside []time.Duration
	losses []float64
}

// Step times the wrapped task's Step (see benchTask).
func (t *benchTask) Step(b *gelo.Batch, step int64) (float64, error) {
	now := time.Now()
	t.starts = append(t.starts, now)
	t.cpu = append(t.cpu, benchkit.ProcessCPUTime())
	if step >= t.stop {
		return 0, errBenchDone
	}
	l, err := t.Task.Step(b, step)
	t.inside = append(t.inside, time.Since(now))
	t.losses = append(t.losses, l)
	return l, err
}

// BenchTrainConfig is the resolved run config of the end-to-end benchmark for a task: the
// paper-size run described above, on the embedded synthetic store at d = e = 4096, on device and
// precision, with evaluations and checkpoints beyond the steps the benchmark times.
func BenchTrainConfig(task settransformer.Task, preset string, steps int, dev, precision string, workers, prefetch int) (config.Run, error) {
	cfg := config.Default()
	cfg.Name = "bench-train-" + string(task)
	cfg.Device, cfg.Precision = dev, precision
	cfg.Store.Synth.Texts = benchTrainTexts
	cfg.Store.Synth.MinTokens, cfg.Store.Synth.MaxTokens = 64, 96
	cfg.Store.Synth.D, cfg.Store.Synth.E = benchTrainWidth, benchTrainWidth
	cfg.Store.Synth.DType = "float32"
	cfg.Sampler.Positives = gelo.Fixed(benchTrainPositives)
	cfg.Sampler.TokensPerText = gelo.Fixed(benchTrainTokens)
	cfg.Sampler.ShieldFrac = gelo.Fixed(benchTrainShield)
	cfg.Sampler.Mix = gelo.MixOrthogonal
	cfg.Sampler.ValFrac = 0.25
	if preset == "" {
		preset = "paper"
	}
	m, err := settransformer.Preset(preset)
	if err != nil {
		return config.Run{}, err
	}
	m.Task = task
	if task == settransformer.TaskUnmix {
		m.DecLayers, m.Slots = 2, benchTrainPositives*benchTrainTokens+int(math.Ceil(benchTrainShield*benchTrainPositives*benchTrainTokens))
	}
	cfg.Model = m
	cfg.Train.BatchSize = benchTrainBatch
	cfg.Train.Steps = steps
	cfg.Train.LR, cfg.Train.WarmupSteps = 1e-4, 1
	cfg.Train.EvalEvery, cfg.Train.CkptEvery, cfg.Train.EvalBatches = steps, steps, 1
	cfg.Train.Workers, cfg.Train.Prefetch = workers, prefetch
	if err := cfg.Validate(); err != nil {
		return config.Run{}, fmt.Errorf("bench train config: %w", err)
	}
	return cfg, nil
}

// BenchTrain runs train.Train, the loop every training run uses (its pipeline of generator
// goroutines, batching, the task's forward and backward, clipping, AdamW, metrics.jsonl), on the
// paper-size config of BenchTrainConfig in a temporary directory, and times opts.Steps steps after
// opts.Warmup. It stops the run right after the last timed step, so no evaluation or checkpoint is
// written or timed. Generation is measured again on its own beforehand (one goroutine, B examples)
// for the cores it needs.
func BenchTrain(ctx context.Context, opts BenchTrainOptions) (BenchTrainResult, error) {
	if opts.Steps < 2 || opts.Warmup < 1 {
		return BenchTrainResult{}, fmt.Errorf("bench train: steps %d, warmup %d: want steps >= 2 and warmup >= 1", opts.Steps, opts.Warmup)
	}
	workers, prefetch := opts.Workers, opts.Prefetch
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0) // a GPU backend halves it once open, below
	}
	if prefetch <= 0 {
		prefetch = 2 * workers
	}
	total := opts.Warmup + opts.Steps
	// total+1 steps in the config: Step total (0-based) stops the run, so the loop never reaches
	// its last step's evaluation and checkpoint.
	cfg, err := BenchTrainConfig(opts.Task, opts.Preset, total+1, opts.Device, opts.Precision, workers, prefetch)
	if err != nil {
		return BenchTrainResult{}, err
	}
	if opts.MixOn != "" {
		cfg.Train.MixOn = opts.MixOn
		if err := cfg.Validate(); err != nil {
			return BenchTrainResult{}, fmt.Errorf("bench train: mix_on %q: %w", opts.MixOn, err)
		}
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	sess, err := Open(cfg)
	if err != nil {
		return BenchTrainResult{}, fmt.Errorf("bench train: %w", err)
	}
	defer sess.Close()
	for _, l := range sess.DeviceLog {
		fmt.Fprintln(log, l)
	}
	if _, host := sess.Backend.(engine.HostMemory); !host && opts.Workers <= 0 {
		workers = benchGPUWorkers(runtime.GOMAXPROCS(0))
		if opts.Prefetch <= 0 {
			prefetch = 2 * workers
		}
		cfg.Train.Workers, cfg.Train.Prefetch = workers, prefetch
	}
	res := BenchTrainResult{Task: opts.Task, Preset: cmpOr(opts.Preset, "paper"), Backend: sess.Backend.Name(), QR: blas.Default().QRName(),
		Params: sess.Task.Params().Len(), B: cfg.Train.BatchSize, D: sess.Corpus.D(),
		Steps: opts.Steps, Warmup: opts.Warmup, Workers: workers, Prefetch: prefetch, Cores: runtime.GOMAXPROCS(0),
		MixOn: cfg.Train.MixOn}
	if !blas.HasLAPACK() {
		res.QR = "scalar Go Householder (no LAPACK in " + blas.Name() + ")"
	}

	// Generation alone: B examples of the train stream far beyond the steps trained, one goroutine.
	var ws gelo.Workspace
	gen := make([]time.Duration, 0, res.B)
	for i := range res.B {
		t0 := time.Now()
		ex, err := sess.Sampler.ExampleWith(&ws, data.Train, tasks.TrainEvalOffset/2+int64(i))
		if err != nil {
			return BenchTrainResult{}, fmt.Errorf("bench train: generation: %w", err)
		}
		gen = append(gen, time.Since(t0))
		res.N = max(res.N, ex.N)
	}
	res.GenPerExample = median(gen)

	dir, err := os.MkdirTemp("", "geloattack-bench-train-")
	if err != nil {
		return BenchTrainResult{}, fmt.Errorf("bench train: %w", err)
	}
	defer os.RemoveAll(dir)
	task := &benchTask{Task: sess.Task, stop: int64(total)}
	_, err = train.Train(ctx, train.Run{Dir: dir, Options: cfg.Train, Task: task, Sampler: sess.Sampler,
		Seed: cfg.Seed, Progress: io.Discard})
	if !errors.Is(err, errBenchDone) {
		if err == nil {
			err = errors.New("the run ended before its last timed step")
		}
		return BenchTrainResult{}, fmt.Errorf("bench train: %w", err)
	}
	// starts[k] is step k's start (k = 0 .. total); step k lasts until starts[k+1].
	var steps []time.Duration
	for k := opts.Warmup; k < total; k++ {
		steps = append(steps, task.starts[k+1].Sub(task.starts[k]))
	}
	inside := task.inside[opts.Warmup:total]
	outside := make([]time.Duration, len(steps))
	for i := range steps {
		outside[i] = steps[i] - inside[i]
	}
	res.StepMedian, res.TaskMedian, res.OutsideMedian = median(steps), median(inside), median(outside)
	res.StepMin, res.StepMax = slices.Min(steps), slices.Max(steps)
	var sum time.Duration
	for _, s := range steps {
		sum += s
	}
	res.StepMean = sum / time.Duration(len(steps))
	res.RowsPerSec = float64(res.B*res.N) / res.StepMedian.Seconds()
	res.GenCoresNeeded = float64(res.B) * res.GenPerExample.Seconds() / res.StepMedian.Seconds()
	res.GenShare = res.GenCoresNeeded / float64(res.Cores)
	res.CPUPerStep = (task.cpu[total] - task.cpu[opts.Warmup]) / time.Duration(opts.Steps)
	if res.CPUPerStep > 0 {
		res.CPURowsPerSec = float64(res.B*res.N) / (res.CPUPerStep.Seconds() / float64(res.Cores))
	}
	res.FirstLoss, res.LastLoss = task.losses[opts.Warmup], task.losses[total-1]
	// A profiling CUDA backend (GELOATTACK_CUDA_PROFILE=1) says where the device time of the whole
	// run went, warm-up steps included; other backends report nothing.
	if p, ok := sess.Backend.(interface{ ProfileReport() string }); ok {
		if r := p.ProfileReport(); r != "" {
			fmt.Fprintf(log, "device profile of the run (%d steps):\n%s", total, r)
		}
	}
	return res, nil
}

// benchGPUWorkers is the default number of generator goroutines beside a GPU step on a machine
// of cores cores: half of them. Measured on one H100 with 16 cores (paper size, bf16, device
// mixing; 2026-11-27): 16 workers gave a retrieval step of 0.054 s median (max 0.097) and unmix
// 0.079 s (max 0.151), 8 gave 0.040 s (0.085) and 0.071 s (0.104), 4 gave 0.042 s and 0.069 s;
// generation needs 2-4 cores there. Every worker past the need only competes with the
// goroutine that launches the step's kernels and with its uploads for the host's cores and
// memory bandwidth.
func benchGPUWorkers(cores int) int { return max(1, cores/2) }

// cmpOr is s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// median is the median of ds (the mean of the middle two for an even count); ds is not changed.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Report is the end-to-end benchmark's report: the run, the step time with its spread, the split
// of a step and what generation costs.
func (r BenchTrainResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "train end-to-end %s %s: %d params, B=%d n=%d d=e=%d, %d timed steps after %d, on %s\n",
		r.Task, r.Preset, r.Params, r.B, r.N, r.D, r.Steps, r.Warmup, r.Backend)
	fmt.Fprintf(&b, "  generator: %d workers, prefetch %d, A by %s; train.mix_on %s\n", r.Workers, r.Prefetch, r.QR, r.MixOn)
	fmt.Fprintf(&b, "  step median %.3f s (mean %.3f, min %.3f, max %.3f) -> %.1f rows/s with generation\n",
		r.StepMedian.Seconds(), r.StepMean.Seconds(), r.StepMin.Seconds(), r.StepMax.Seconds(), r.RowsPerSec)
	fmt.Fprintf(&b, "  inside the task's step (forward, backward) %.3f s, outside (clip, AdamW, log, batch wait) %.3f s\n",
		r.TaskMedian.Seconds(), r.OutsideMedian.Seconds())
	fmt.Fprintf(&b, "  generation %.1f ms an example on one goroutine -> %.2f cores to keep up, %.0f%% of the %d cores\n",
		1000*r.GenPerExample.Seconds(), r.GenCoresNeeded, 100*r.GenShare, r.Cores)
	fmt.Fprintf(&b, "  process CPU time %.3f s a step over all threads -> %.1f rows/s on %d dedicated cores\n",
		r.CPUPerStep.Seconds(), r.CPURowsPerSec, r.Cores)
	fmt.Fprintf(&b, "  loss first %.4f last %.4f\n", r.FirstLoss, r.LastLoss)
	return b.String()
}
