package settransformer

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses/ot"
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

// BenchResult is what one training-step benchmark measured.
type BenchResult struct {
	Task        Task    // retrieval or unmix
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
}

// gaussian fills n values from rng.
func gaussian(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// benchBatch draws a synthetic batch of the preset's shape: Gaussian rows (any content does: the
// cost of a step does not depend on the values), two positives per set among 2B candidates.
func benchBatch(cfg Config, s benchShape, seed uint64) (Batch, Targets) {
	rng := rand.New(rand.NewPCG(seed, 0xbe4c))
	u := gaussian(rng, s.B*s.N*cfg.InputDim)
	cand := gaussian(rng, 2*s.B*cfg.CandidateDim)
	pos := make([][]int, s.B)
	for b := range pos {
		pos[b] = []int{2 * b, 2*b + 1}
	}
	return Batch{B: s.B, N: s.N, U: u}, Targets{Candidates: cand, Positives: pos}
}

// benchUnmixBatch draws a synthetic unmix batch: Gaussian U (B, N, d) and 3N/4 Gaussian clean
// rows per set.
func benchUnmixBatch(cfg Config, s benchShape, seed uint64) (Batch, UnmixTargets) {
	rng := rand.New(rand.NewPCG(seed, 0x756e6d))
	d, nc := cfg.InputDim, 3*s.N/4
	u := gaussian(rng, s.B*s.N*d)
	t := UnmixTargets{H: gaussian(rng, s.B*nc*d), CleanRows: make([]int, s.B), MeanNorm: make([]float32, s.B)}
	for b := range t.CleanRows {
		t.CleanRows[b], t.MeanNorm[b] = nc, float32(math.Sqrt(float64(d)))
	}
	return Batch{B: s.B, N: s.N, U: u}, t
}

// benchModel is what the step benchmark needs of a model.
type benchModel struct {
	params   *engine.Params
	tape     *engine.Tape
	slots    int
	fwdBwd   func() error // forward and backward of the benchmark batch
	inferFwd func() error // inference forward of the same batch
}

// newBenchModel builds the task's model for the preset and its synthetic batch.
func newBenchModel(task Task, preset string, shape benchShape) (benchModel, error) {
	cfg, err := Preset(preset)
	if err != nil {
		return benchModel{}, err
	}
	switch task {
	case TaskRetrieval:
		m, err := New(cfg, 1)
		if err != nil {
			return benchModel{}, err
		}
		batch, tg := benchBatch(cfg, shape, 2)
		return benchModel{
			params: m.Params(), tape: m.Tape(),
			fwdBwd:   func() error { _, err := m.ForwardBackward(batch, tg); return err },
			inferFwd: func() error { _, err := m.Forward(batch); return err },
		}, nil
	case TaskUnmix:
		cfg.Task, cfg.DecLayers, cfg.Slots = TaskUnmix, benchDecLayers, benchSlotsPerN*shape.N
		loss := ot.DefaultConfig()
		m, err := NewUnmix(cfg, 1, WithLoss(loss))
		if err != nil {
			return benchModel{}, err
		}
		batch, tg := benchUnmixBatch(cfg, shape, 2)
		return benchModel{
			params: m.Params(), tape: m.Tape(), slots: cfg.Slots,
			fwdBwd:   func() error { _, _, err := m.ForwardBackward(batch, tg, loss); return err },
			inferFwd: func() error { _, err := m.Forward(batch); return err },
		}, nil
	default:
		return benchModel{}, fmt.Errorf("settransformer: benchmark task %q, want retrieval or unmix", task)
	}
}

// benchmarkSteps builds the preset's model for task and times steps full training steps after one
// warm-up step (which sizes the arena).
func benchmarkSteps(ctx context.Context, task Task, preset string, steps int) (BenchResult, error) {
	shape, ok := benchShapes[preset]
	if !ok {
		return BenchResult{}, fmt.Errorf("settransformer: no benchmark shape for preset %q (want one of %v)", preset, PresetNames())
	}
	if steps < 1 {
		return BenchResult{}, fmt.Errorf("settransformer: benchmark steps = %d, want >= 1", steps)
	}
	_ = resetPeakRSS() // best effort: without it the peak includes whatever ran before
	m, err := newBenchModel(task, preset, shape)
	if err != nil {
		return BenchResult{}, err
	}
	opt, err := engine.NewAdamW(m.params, engine.AdamWConfig{LR: 1e-4, WeightDecay: 0.1})
	if err != nil {
		return BenchResult{}, err
	}
	step := func() (time.Duration, error) {
		m.params.ZeroGrad()
		if err := m.fwdBwd(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		engine.ClipGradNorm(m.params, 1)
		opt.Step()
		return time.Since(t0), nil
	}
	if _, err := step(); err != nil { // warm-up: the arena and gradient pool grow here
		return BenchResult{}, err
	}
	res := BenchResult{Task: task, Preset: preset, Params: m.params.Len(), B: shape.B, N: shape.N, Slots: m.slots, Steps: steps}
	var optTotal time.Duration
	start, cpuStart := time.Now(), processCPUTime()
	for i := 0; i < steps; i++ {
		if err := ctx.Err(); err != nil {
			return BenchResult{}, err
		}
		d, err := step()
		if err != nil {
			return BenchResult{}, err
		}
		optTotal += d
	}
	elapsed, cpu := time.Since(start), processCPUTime()-cpuStart
	t0 := time.Now()
	if err := m.inferFwd(); err != nil {
		return BenchResult{}, err
	}
	res.FwdSeconds = time.Since(t0).Seconds()
	res.StepSeconds = elapsed.Seconds() / float64(steps)
	res.OptSeconds = optTotal.Seconds() / float64(steps)
	res.RowsPerSec = float64(shape.B*shape.N) / res.StepSeconds
	res.CPUSeconds = cpu.Seconds() / float64(steps)
	res.Workers = runtime.GOMAXPROCS(0)
	if res.CPUSeconds > 0 {
		res.CPURowsPerSec = float64(shape.B*shape.N) / (res.CPUSeconds / float64(res.Workers))
	}
	if res.PeakRSS, err = peakRSS(); err != nil {
		res.PeakRSS = -1
	}
	_, res.ArenaPeak = m.tape.ArenaBytes()
	res.GradPool = m.tape.GradPoolBytes()
	res.Backend = m.tape.Backend().Name()
	return res, nil
}

// RunBench times steps training steps (forward, backward, gradient clipping, AdamW) of the named
// preset's retrieval model on a synthetic batch (tiny: B4 n64, small: B8 n128, paper: B16 n256;
// d = e = 4096) and writes rows/s, the split of a step and the peak RSS to out.
func RunBench(ctx context.Context, preset string, steps int, out io.Writer) error {
	return runBench(ctx, TaskRetrieval, preset, steps, out)
}

// RunUnmixBench is RunBench for the unmixing model: the preset's encoder plus a decoder of 2
// blocks over S = n slots, trained with the default unmix loss (balanced Sinkhorn, eps 0.05, 50
// iterations, cycle and both regularisers) against 3n/4 clean rows per set; d = 4096.
func RunUnmixBench(ctx context.Context, preset string, steps int, out io.Writer) error {
	return runBench(ctx, TaskUnmix, preset, steps, out)
}

func runBench(ctx context.Context, task Task, preset string, steps int, out io.Writer) error {
	res, err := benchmarkSteps(ctx, task, preset, steps)
	if err != nil {
		return err
	}
	const mib = 1 << 20
	name, shape := res.Preset, fmt.Sprintf("B=%d n=%d d=e=4096", res.B, res.N)
	if task == TaskUnmix {
		name = "unmix " + name
		shape = fmt.Sprintf("B=%d n=%d S=%d n_clean=%d dec_layers=%d d=4096", res.B, res.N, res.Slots, 3*res.N/4, benchDecLayers)
	}
	_, err = fmt.Fprintf(out,
		"settransformer %s: %d params, %s, %d steps on %s\n"+
			"  step %.3f s (forward alone %.3f s, clip+AdamW %.3f s) -> %.1f rows/s\n"+
			"  step CPU time %.3f s over all threads -> %.1f rows/s on %d dedicated cores\n"+
			"  peak RSS %.0f MiB, activation arena %.0f MiB, activation-gradient pool %.0f MiB\n",
		name, res.Params, shape, res.Steps, res.Backend,
		res.StepSeconds, res.FwdSeconds, res.OptSeconds, res.RowsPerSec,
		res.CPUSeconds, res.CPURowsPerSec, res.Workers,
		float64(res.PeakRSS)/mib, float64(res.ArenaPeak)/mib, float64(res.GradPool)/mib)
	return err
}
