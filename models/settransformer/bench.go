package settransformer

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/gelo-research/geloattack/engine"
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

// BenchResult is what one training-step benchmark measured.
type BenchResult struct {
	Preset      string  // preset name
	Params      int     // number of parameters
	B, N        int     // sets per batch and rows per set
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

// benchBatch draws a synthetic batch of the preset's shape: Gaussian rows (any content does: the
// cost of a step does not depend on the values), two positives per set among 2B candidates.
func benchBatch(cfg Config, s benchShape, seed uint64) (Batch, Targets) {
	rng := rand.New(rand.NewPCG(seed, 0xbe4c))
	u := make([]float32, s.B*s.N*cfg.InputDim)
	for i := range u {
		u[i] = float32(rng.NormFloat64())
	}
	cand := make([]float32, 2*s.B*cfg.CandidateDim)
	for i := range cand {
		cand[i] = float32(rng.NormFloat64())
	}
	pos := make([][]int, s.B)
	for b := range pos {
		pos[b] = []int{2 * b, 2*b + 1}
	}
	return Batch{B: s.B, N: s.N, U: u}, Targets{Candidates: cand, Positives: pos}
}

// benchmarkSteps builds the preset's model and times steps full training steps after one warm-up
// step (which sizes the arena).
func benchmarkSteps(ctx context.Context, preset string, steps int) (BenchResult, error) {
	cfg, err := Preset(preset)
	if err != nil {
		return BenchResult{}, err
	}
	shape, ok := benchShapes[preset]
	if !ok {
		return BenchResult{}, fmt.Errorf("settransformer: no benchmark shape for preset %q", preset)
	}
	if steps < 1 {
		return BenchResult{}, fmt.Errorf("settransformer: benchmark steps = %d, want >= 1", steps)
	}
	_ = resetPeakRSS() // best effort: without it the peak includes whatever ran before
	m, err := New(cfg, 1)
	if err != nil {
		return BenchResult{}, err
	}
	opt, err := engine.NewAdamW(m.Params(), engine.AdamWConfig{LR: 1e-4, WeightDecay: 0.1})
	if err != nil {
		return BenchResult{}, err
	}
	batch, tg := benchBatch(cfg, shape, 2)
	step := func() (time.Duration, error) {
		m.Params().ZeroGrad()
		if _, err := m.ForwardBackward(batch, tg); err != nil {
			return 0, err
		}
		t0 := time.Now()
		engine.ClipGradNorm(m.Params(), 1)
		opt.Step()
		return time.Since(t0), nil
	}
	if _, err := step(); err != nil { // warm-up: the arena and gradient pool grow here
		return BenchResult{}, err
	}
	res := BenchResult{Preset: preset, Params: m.Params().Len(), B: shape.B, N: shape.N, Steps: steps}
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
	if _, err := m.Forward(batch); err != nil {
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
	_, res.ArenaPeak = m.Tape().ArenaBytes()
	res.GradPool = m.Tape().GradPoolBytes()
	res.Backend = m.Tape().Backend().Name()
	return res, nil
}

// RunBench times steps training steps (forward, backward, gradient clipping, AdamW) of the named
// preset on a synthetic batch (tiny: B4 n64, small: B8 n128, paper: B16 n256; d = e = 4096) and
// writes rows/s, the split of a step and the peak RSS to out.
func RunBench(ctx context.Context, preset string, steps int, out io.Writer) error {
	res, err := benchmarkSteps(ctx, preset, steps)
	if err != nil {
		return err
	}
	const mib = 1 << 20
	_, err = fmt.Fprintf(out,
		"settransformer %s: %d params, B=%d n=%d d=e=4096, %d steps on %s\n"+
			"  step %.3f s (forward alone %.3f s, clip+AdamW %.3f s) -> %.1f rows/s\n"+
			"  step CPU time %.3f s over all threads -> %.1f rows/s on %d dedicated cores\n"+
			"  peak RSS %.0f MiB, activation arena %.0f MiB, activation-gradient pool %.0f MiB\n",
		res.Preset, res.Params, res.B, res.N, res.Steps, res.Backend,
		res.StepSeconds, res.FwdSeconds, res.OptSeconds, res.RowsPerSec,
		res.CPUSeconds, res.CPURowsPerSec, res.Workers,
		float64(res.PeakRSS)/mib, float64(res.ArenaPeak)/mib, float64(res.GradPool)/mib)
	return err
}
