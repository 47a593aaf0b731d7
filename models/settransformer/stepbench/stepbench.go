// Package stepbench is the training-step benchmark of the set transformer (`geloattack bench
// -what step,unmix`): it builds a preset's retrieval or unmix model on a backend, times full
// training steps (forward, backward, clip, AdamW) on a synthetic batch and reports rows/s, the split
// of a step, memory and, where the backend counts them, GEMM FLOPs and MFU.
package stepbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/benchkit"
	"github.com/gelo-research/geloattack/losses/ot"
	st "github.com/gelo-research/geloattack/models/settransformer"
)

// benchShape is the batch a training-step benchmark uses for a preset.
type benchShape struct {
	// B is the number of sets per batch and N the rows of each.
	B, N int
}

// benchShapes are the batches of the throughput targets: tiny n64 B4, small n128 B8, paper
// n256 B16 (4096 rows per step, the paper's setting).
var benchShapes = map[string]benchShape{
	"tiny":  {B: 4, N: 64},
	"small": {B: 8, N: 128},
	"paper": {B: 16, N: 256},
}

// Unmix benchmark choices: DecLayers and the slot count S relative to the set size n. S = n is
// the most any set of n observed rows can need (n_clean <= n), so it is the expensive end; the
// benchmark's sets have n_clean = 3n/4 clean rows, as the generator benchmark's (4 positives of
// 3n/16 tokens plus n/4 shields).
const (
	benchDecLayers = 2
	benchSlotsPerN = 1
)

// Result is what one training-step benchmark measured.
type Result struct {
	Task        st.Task // retrieval or unmix
	Preset      string  // preset name
	Params      int     // number of parameters
	B, N        int     // sets per batch and rows per set
	Slots       int     // unmix: slot queries S; clean rows per set are 3N/4
	Steps       int     // timed steps (after one warm-up step)
	StepSeconds float64 // mean wall time of a full step (forward, backward, clip, AdamW)
	FwdSeconds  float64 // one forward pass alone (inference), for the split of a step
	OptSeconds  float64 // mean wall time of clip + AdamW within a step
	RowsPerSec  float64 // B*N / StepSeconds
	CPUSeconds  float64 // mean process CPU time (all threads) of a step
	Workers     int     // cores the engine computes on (GOMAXPROCS)
	// CPURowsPerSec is B*N / (CPUSeconds / Workers): the throughput the step's CPU work would give
	// with Workers cores to itself. On a shared machine it is the better estimate of an idle
	// machine's figure (spin-waiting under contention still inflates CPUSeconds).
	CPURowsPerSec float64
	PeakRSS       int64  // VmHWM in bytes, since the benchmark's model was built
	ArenaPeak     int64  // activation arena bytes used by one step
	GradPool      int64  // activation-gradient pool bytes
	Backend       string // the engine's description of the device
	// OnCPU is true on the CPU backend, where CPURowsPerSec is meaningful; elsewhere CPUSeconds
	// is the host's share of a step (launching kernels, copying batches).
	OnCPU bool
	// Precision is the GEMM precision: the backend's (fp32, tf32 or bf16) when it says, else fp32.
	Precision string
	// DevicePeak is the most device memory the backend held since it was opened, in bytes; -1
	// when the backend does not report it (the CPU: see PeakRSS).
	DevicePeak int64
	// GemmFLOPs is the floating-point operations of the GEMMs (and attention products) of one
	// timed step, from the backend's engine.FLOPCounter; -1 when it does not count them.
	GemmFLOPs float64
	// FLOPSPerSec is GemmFLOPs / StepSeconds (0 when not counted).
	FLOPSPerSec float64
	// PeakFLOPS is the device's dense peak at Precision (see benchkit.PeakFLOPS); 0 when unknown.
	PeakFLOPS float64
	// MFU is FLOPSPerSec / PeakFLOPS, the model FLOP utilisation; NaN when either is unknown.
	MFU float64
	// GemmPeak is the GEMM FLOP/s the backend measured on the CPU in the same run (see
	// measureGemmPeak: the best of PeakProducts, on the step's workers); 0 elsewhere.
	GemmPeak float64
	// GemmPeakCPU is GemmPeak by CPU time: FLOPs / (CPU time / Workers), the best run's.
	GemmPeakCPU float64
	// PeakProducts are the products GemmPeak was measured on, each with its own best.
	PeakProducts []PeakProduct
	// GemmFraction is FLOPSPerSec / GemmPeak: the step's share of the GEMM limit, the time its
	// GEMMs alone would take at the peak over the time the step took; NaN when not measured.
	GemmFraction float64
	// GemmFractionCPU is GemmFraction by CPU time, the step's CPUSeconds / Workers (as
	// CPURowsPerSec) against GemmPeakCPU: on a machine shared with other work, a share that
	// waiting for the other work lowers less; NaN when not measured.
	GemmFractionCPU float64
}

// Options say where a training-step benchmark runs.
type Options struct {
	// Backend is the device the model is built on (engine/device.Open picks one from a spec); nil
	// means a new CPU backend. The benchmark does not close it; a fresh backend per benchmark gives
	// a device-memory peak and a FLOP count of that benchmark alone.
	Backend engine.Backend
}

// benchModel is what the step benchmark needs of a model.
type benchModel struct {
	params   *engine.Params
	tape     *engine.Tape
	slots    int
	peak     []PeakProduct // the products the GEMM peak is measured on (peakProducts)
	fwdBwd   func() error  // forward and backward of the benchmark batch
	inferFwd func() error  // inference forward of the same batch
}

// newBenchModel builds the task's model for the preset on be and its synthetic batch.
func newBenchModel(be engine.Backend, task st.Task, preset string, shape benchShape) (benchModel, error) {
	cfg, err := st.Preset(preset)
	if err != nil {
		return benchModel{}, err
	}
	switch task {
	case st.TaskRetrieval:
		m, err := st.New(be, cfg, 1)
		if err != nil {
			return benchModel{}, err
		}
		batch, tg := st.SyntheticBatch(cfg, shape.B, shape.N, 2)
		return benchModel{
			params: m.Params(), tape: m.Tape(), peak: peakProducts(shape.B*(shape.N+1), cfg.MLPHidden, cfg.Hidden), // a CLS row per set
			fwdBwd:   func() error { _, err := m.ForwardBackward(batch, tg); return err },
			inferFwd: func() error { _, err := m.Forward(batch); return err },
		}, nil
	case st.TaskUnmix:
		cfg.Task, cfg.DecLayers, cfg.Slots = st.TaskUnmix, benchDecLayers, benchSlotsPerN*shape.N
		loss := ot.DefaultConfig()
		m, err := st.NewUnmix(be, cfg, 1, st.WithLoss(loss))
		if err != nil {
			return benchModel{}, err
		}
		batch, tg := st.SyntheticUnmixBatch(cfg, shape.B, shape.N, 2)
		return benchModel{
			params: m.Params(), tape: m.Tape(), slots: cfg.Slots, peak: peakProducts(shape.B*shape.N, cfg.MLPHidden, cfg.Hidden),
			fwdBwd:   func() error { _, err := m.ForwardBackward(batch, tg); return err },
			inferFwd: func() error { _, err := m.Forward(batch); return err },
		}, nil
	default:
		return benchModel{}, fmt.Errorf("settransformer: benchmark task %q, want retrieval or unmix", task)
	}
}

// benchmarkSteps is benchmarkStepsOn a new CPU backend.
func benchmarkSteps(ctx context.Context, task st.Task, preset string, steps int) (Result, error) {
	return benchmarkStepsOn(ctx, nil, task, preset, steps)
}

// benchmarkStepsOn builds the preset's model for task on be (nil: a new CPU backend) and times
// steps full training steps after one warm-up step (which sizes the arena). The clock is read
// after engine.Sync, so queued device work is counted.
func benchmarkStepsOn(ctx context.Context, be engine.Backend, task st.Task, preset string, steps int) (Result, error) {
	shape, ok := benchShapes[preset]
	if !ok {
		return Result{}, fmt.Errorf("settransformer: no benchmark shape for preset %q (want one of %v)", preset, st.PresetNames())
	}
	if steps < 1 {
		return Result{}, fmt.Errorf("settransformer: benchmark steps = %d, want >= 1", steps)
	}
	if be == nil {
		cpuBe, err := cpu.New(cpu.Config{})
		if err != nil {
			return Result{}, fmt.Errorf("settransformer: open compute device: %w", err)
		}
		be = cpuBe
	}
	syncDev := func(what string) error {
		if err := engine.Sync(be); err != nil {
			return fmt.Errorf("settransformer: benchmark %s: %w", what, err)
		}
		return nil
	}
	_ = benchkit.ResetPeakRSS() // best effort: without it the peak includes whatever ran before
	m, err := newBenchModel(be, task, preset, shape)
	if err != nil {
		return Result{}, err
	}
	opt, err := engine.NewAdamW(m.params, engine.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		return Result{}, err
	}
	step := func() (time.Duration, error) {
		m.params.ZeroGrad()
		if err := engine.RecordStep(be, m.fwdBwd); err != nil {
			return 0, err
		}
		if err := syncDev("step"); err != nil {
			return 0, err
		}
		t0 := time.Now()
		engine.ClipGradNorm(m.params, 1)
		opt.Step()
		if err := syncDev("optimizer step"); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	if _, err := step(); err != nil { // warm-up: the arena and gradient pool grow here
		return Result{}, err
	}
	res := Result{Task: task, Preset: preset, Params: m.params.Len(), B: shape.B, N: shape.N, Slots: m.slots, Steps: steps}
	counter, counts := be.(engine.FLOPCounter)
	var flops0 int64
	if counts {
		flops0 = counter.GemmFLOPs()
	}
	var optTotal time.Duration
	start, cpuStart := time.Now(), benchkit.ProcessCPUTime()
	for i := 0; i < steps; i++ {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		d, err := step()
		if err != nil {
			return Result{}, err
		}
		optTotal += d
	}
	if err := syncDev("timed steps"); err != nil {
		return Result{}, err
	}
	elapsed, cpuTime := time.Since(start), benchkit.ProcessCPUTime()-cpuStart
	var flops int64
	if counts {
		flops = counter.GemmFLOPs() - flops0
	}
	t0 := time.Now()
	if err := m.inferFwd(); err != nil {
		return Result{}, err
	}
	if err := syncDev("forward"); err != nil {
		return Result{}, err
	}
	res.FwdSeconds = time.Since(t0).Seconds()
	res.StepSeconds = elapsed.Seconds() / float64(steps)
	res.OptSeconds = optTotal.Seconds() / float64(steps)
	res.RowsPerSec = float64(shape.B*shape.N) / res.StepSeconds
	res.CPUSeconds = cpuTime.Seconds() / float64(steps)
	res.Workers = runtime.GOMAXPROCS(0)
	if res.CPUSeconds > 0 {
		res.CPURowsPerSec = float64(shape.B*shape.N) / (res.CPUSeconds / float64(res.Workers))
	}
	if res.PeakRSS, err = benchkit.PeakRSS(); err != nil {
		res.PeakRSS = -1
	}
	_, res.ArenaPeak = m.tape.ArenaBytes()
	res.GradPool = m.tape.GradPoolBytes()
	res.Backend = be.Name()
	_, res.OnCPU = be.(*cpu.Backend)
	res.Precision = "fp32"
	if p, ok := be.(interface{ Precision() string }); ok && p.Precision() != "" {
		res.Precision = p.Precision()
	}
	res.DevicePeak = -1
	if p, ok := be.(interface{ PeakBytes() int64 }); ok {
		res.DevicePeak = p.PeakBytes()
	}
	res.GemmFLOPs, res.MFU, res.GemmFraction, res.GemmFractionCPU = -1, math.NaN(), math.NaN(), math.NaN()
	if counts {
		res.GemmFLOPs = float64(flops) / float64(steps)
		res.FLOPSPerSec = res.GemmFLOPs / res.StepSeconds
		if peak, ok := benchkit.PeakFLOPS(res.Backend, res.Precision); ok {
			res.PeakFLOPS = peak
			res.MFU = res.FLOPSPerSec / peak
		}
	}
	if counts && res.OnCPU {
		// Measured after the steps (the counter's share is read), on the same workers: a CPU's
		// peak depends on its kernel, clock and neighbours, so it is measured, not looked up.
		res.PeakProducts = m.peak
		if res.GemmPeak, res.GemmPeakCPU, err = measureGemmPeak(ctx, be, res.PeakProducts, res.Workers); err != nil {
			return Result{}, err
		}
		res.GemmFraction = res.FLOPSPerSec / res.GemmPeak
		if res.CPUSeconds > 0 && res.GemmPeakCPU > 0 {
			res.GemmFractionCPU = res.GemmFLOPs / (res.CPUSeconds / float64(res.Workers)) / res.GemmPeakCPU
		}
	}
	return res, nil
}

// Run times steps training steps (forward, backward, gradient clipping, AdamW) of the named
// preset's retrieval model on a synthetic batch (tiny: B4 n64, small: B8 n128, paper: B16 n256;
// d = e = 4096) on a new CPU backend and writes rows/s, the split of a step and the peak RSS to
// out. RunWith runs it on another device.
func Run(ctx context.Context, preset string, steps int, out io.Writer) error {
	return runBench(ctx, Options{}, st.TaskRetrieval, preset, steps, out)
}

// RunWith is Run on opts.Backend. Besides the CPU report it writes, where the backend
// offers them, the peak device memory and the GEMM GFLOP per step with the achieved TFLOP/s and
// the MFU (see benchkit.PeakFLOPS; "n/a" for devices whose peak is not known).
func RunWith(ctx context.Context, opts Options, preset string, steps int, out io.Writer) error {
	return runBench(ctx, opts, st.TaskRetrieval, preset, steps, out)
}

// RunUnmix is Run for the unmixing model: the preset's encoder plus a decoder of 2
// blocks over S = n slots, trained with the default unmix loss (balanced Sinkhorn, eps 0.05, 50
// iterations, cycle and both regularisers) against 3n/4 clean rows per set; d = 4096.
func RunUnmix(ctx context.Context, preset string, steps int, out io.Writer) error {
	return runBench(ctx, Options{}, st.TaskUnmix, preset, steps, out)
}

// RunUnmixWith is RunUnmix on opts.Backend, reporting as RunWith.
func RunUnmixWith(ctx context.Context, opts Options, preset string, steps int, out io.Writer) error {
	return runBench(ctx, opts, st.TaskUnmix, preset, steps, out)
}

// runBench runs the task's benchmark on opts.Backend and writes its report to out.
func runBench(ctx context.Context, opts Options, task st.Task, preset string, steps int, out io.Writer) error {
	res, err := benchmarkStepsOn(ctx, opts.Backend, task, preset, steps)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, res.Report())
	return err
}

// Report is the benchmark's report as Run writes it: the model and device, the step time and
// throughput, memory, and on devices that count them the GEMM FLOPs and MFU.
func (res Result) Report() string {
	const mib = 1 << 20
	name, shape := res.Preset, fmt.Sprintf("B=%d n=%d d=e=4096", res.B, res.N)
	if res.Task == st.TaskUnmix {
		name = "unmix " + name
		shape = fmt.Sprintf("B=%d n=%d S=%d n_clean=%d dec_layers=%d d=4096", res.B, res.N, res.Slots, 3*res.N/4, benchDecLayers)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "settransformer %s: %d params, %s, %d steps on %s\n"+
		"  step %.3f s (forward alone %.3f s, clip+AdamW %.3f s) -> %.1f rows/s\n",
		name, res.Params, shape, res.Steps, res.Backend,
		res.StepSeconds, res.FwdSeconds, res.OptSeconds, res.RowsPerSec)
	if res.OnCPU {
		fmt.Fprintf(&b, "  step CPU time %.3f s over all threads -> %.1f rows/s on %d dedicated cores\n",
			res.CPUSeconds, res.CPURowsPerSec, res.Workers)
	} else {
		fmt.Fprintf(&b, "  host CPU time %.3f s per step over all threads\n", res.CPUSeconds)
	}
	fmt.Fprintf(&b, "  peak RSS %.0f MiB, activation arena %.0f MiB, activation-gradient pool %.0f MiB\n",
		float64(res.PeakRSS)/mib, float64(res.ArenaPeak)/mib, float64(res.GradPool)/mib)
	if res.DevicePeak >= 0 {
		fmt.Fprintf(&b, "  peak device memory %.0f MiB\n", float64(res.DevicePeak)/mib)
	}
	if res.GemmPeak > 0 {
		// The limit: the step's GEMMs alone at the measured peak.
		limit := res.GemmFLOPs / res.GemmPeak
		fmt.Fprintf(&b, "  GEMM %.1f GFLOP/step -> %.1f GFLOP/s; sgemm peak %.1f GFLOP/s on the same %d workers (best of %d runs:",
			res.GemmFLOPs/1e9, res.FLOPSPerSec/1e9, res.GemmPeak/1e9, res.Workers, gemmPeakRuns)
		for i, p := range res.PeakProducts {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s (%d, %d, %d) %.1f", sep, p.Name, p.M, p.N, p.K, p.FLOPS/1e9)
		}
		fmt.Fprintf(&b, ")\n  -> %.1f%% of the GEMM limit (%.3f s/step, %.1f rows/s at the peak)\n",
			100*res.GemmFraction, limit, float64(res.B*res.N)/limit)
		fmt.Fprintf(&b, "  by CPU time (GFLOP per CPU-second x %d workers): %.1f against a peak of %.1f -> %.1f%% of the GEMM limit\n",
			res.Workers,
			res.GemmFLOPs/(res.CPUSeconds/float64(res.Workers))/1e9, res.GemmPeakCPU/1e9, 100*res.GemmFractionCPU)
	} else if res.GemmFLOPs >= 0 {
		mfu := "n/a (peak of this device not known)"
		if !math.IsNaN(res.MFU) {
			mfu = fmt.Sprintf("%.2f%% of %.0f TFLOP/s %s peak", 100*res.MFU, res.PeakFLOPS/1e12, res.Precision)
		}
		fmt.Fprintf(&b, "  GEMM %.1f GFLOP/step -> %.2f TFLOP/s (%s), MFU %s\n",
			res.GemmFLOPs/1e9, res.FLOPSPerSec/1e12, res.Precision, mfu)
	}
	return b.String()
}
