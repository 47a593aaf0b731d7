package settransformer

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/losses/ot"
)

// graphTrainer is one model of either task trained as train.Train trains it: each step's forward
// and backward between the backend's BeginStep and EndStep (recorded, and replayed as a CUDA
// graph when graphs are on), then clipping and AdamW.
type graphTrainer struct {
	be   *cuda.Backend
	ps   *engine.Params
	opt  *engine.AdamW
	fb   func(i int) (float32, error) // forward and backward of batch i
	nbat int
}

// graphBatches are the batches of one task and shape sequence, shared by every backend.
type graphBatches struct {
	retrieval []struct {
		b Batch
		t Targets
	}
	unmix []struct {
		b Batch
		t UnmixTargets
	}
}

// makeGraphBatches draws one batch per entry of sizes (set sizes; B sets each, the last 3 rows of
// set 1 padded, as set-size buckets pad), each from its own seed: every step uploads new data.
func makeGraphBatches(cfg Config, task Task, B int, sizes []int) graphBatches {
	var gb graphBatches
	for i, n := range sizes {
		seed := uint64(40 + i)
		if task == TaskRetrieval {
			b, tg := SyntheticBatch(cfg, B, n, seed)
			b.Mask = maskTail(B, n, 1, 3)
			gb.retrieval = append(gb.retrieval, struct {
				b Batch
				t Targets
			}{b, tg})
		} else {
			b, tg := SyntheticUnmixBatch(cfg, B, n, seed)
			b.Mask = maskTail(B, n, 1, 3)
			gb.unmix = append(gb.unmix, struct {
				b Batch
				t UnmixTargets
			}{b, tg})
		}
	}
	return gb
}

// lazyBatches draws makeGraphBatches' batches on the first call and returns them on every call.
func lazyBatches(cfg Config, task Task, B int, sizes []int) func() graphBatches {
	var gb *graphBatches
	return func() graphBatches {
		if gb == nil {
			b := makeGraphBatches(cfg, task, B, sizes)
			gb = &b
		}
		return *gb
	}
}

// newGraphTrainer builds the task's model (seed 3) on a new backend of precision and graph mode.
// The batches are drawn (batches()) only once a GPU has opened: paper batches take seconds.
func newGraphTrainer(t *testing.T, cfg Config, task Task, prec string, mode cuda.GraphMode, batches func() graphBatches) *graphTrainer {
	t.Helper()
	be := cudatest.OpenWith(t, cuda.BackendOptions{Precision: prec, Graphs: mode, GraphLog: graphTestLog{t}})
	gb := batches()
	g := &graphTrainer{be: be}
	if task == TaskRetrieval {
		m, err := New(be, cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		g.ps, g.nbat = m.Params(), len(gb.retrieval)
		g.fb = func(i int) (float32, error) { return m.ForwardBackward(gb.retrieval[i].b, gb.retrieval[i].t) }
	} else {
		m, err := NewUnmix(be, cfg, 3, WithLoss(ot.DefaultConfig()))
		if err != nil {
			t.Fatal(err)
		}
		g.ps, g.nbat = m.Params(), len(gb.unmix)
		g.fb = func(i int) (float32, error) { return m.ForwardBackward(gb.unmix[i].b, gb.unmix[i].t) }
	}
	opt, err := engine.NewAdamW(g.ps, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	g.opt = opt
	return g
}

// step trains on batch i and returns the loss.
func (g *graphTrainer) step(t *testing.T, i int) float32 {
	t.Helper()
	g.ps.ZeroGrad()
	g.be.BeginStep()
	l, err := g.fb(i)
	g.be.EndStep()
	if err != nil {
		t.Fatal(err)
	}
	engine.ClipGradNorm(g.ps, 1)
	g.opt.Step()
	return l
}

// graphTestLog writes graph mode's log lines to the test log.
type graphTestLog struct{ t *testing.T }

func (l graphTestLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// graphPresets are the configurations the graph tests run: tiny (small, every op kind) and paper
// (B16 n256 d=e=4096, h384 L24: the step the 12 ms target is about).
func graphPreset(t *testing.T, name string) (cfg Config, B, N int) {
	t.Helper()
	cfg, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	switch name {
	case "paper":
		cfg.InputDim, cfg.CandidateDim = 4096, 4096
		B, N = 16, 256
	default:
		B, N = 4, 64
	}
	return cfg, B, N
}

// unmixConfig is cfg for the unmix task (the decoder's slots cover the largest set).
func unmixConfig(cfg Config, N int) Config {
	cfg.Task, cfg.DecLayers, cfg.Slots = TaskUnmix, 2, N+4
	return cfg
}

// TestCUDAGraphStepMatchesEager trains both tasks, fp32 and bf16, tiny and paper presets, for 7
// steps on a backend without graphs and on one with graphs on (steps 1-2 eager, 3 captured,
// then replayed; step 5 a smaller set size, eager, between replays; each step new data): every
// loss and every parameter after the last step must be bit for bit alike, and the graphs must
// have replayed at least twice without a fallback.
func TestCUDAGraphStepMatchesEager(t *testing.T) {
	// Skip here without a GPU: a parent whose subtests all skip would pass, checking nothing.
	cudatest.Open(t, cuda.PrecisionFP32)
	for _, preset := range []string{"tiny", "paper"} {
		base, B, N := graphPreset(t, preset)
		sizes := []int{N, N, N, N, N * 3 / 4, N, N}
		for _, task := range []Task{TaskRetrieval, TaskUnmix} {
			cfg := base
			if task == TaskUnmix {
				cfg = unmixConfig(base, N)
			}
			gb := lazyBatches(cfg, task, B, sizes)
			for _, prec := range []string{cuda.PrecisionFP32, cuda.PrecisionBF16} {
				t.Run(fmt.Sprintf("%s/%s/%s", preset, task, prec), func(t *testing.T) {
					var losses [2][]float32
					var params [2][]float32
					var stats cuda.GraphStats
					for k, mode := range []cuda.GraphMode{cuda.GraphsOff, cuda.GraphsOn} {
						g := newGraphTrainer(t, cfg, task, prec, mode, gb)
						for i := range sizes {
							losses[k] = append(losses[k], g.step(t, i))
						}
						params[k] = g.ps.Data().ToHost()
						if err := g.be.Sync(); err != nil {
							t.Fatal(err)
						}
						stats = g.be.GraphStats()
					}
					t.Logf("%s %s %s: %s", preset, task, prec, stats)
					if stats.Replayed < 2 || stats.Fallbacks != 0 || stats.Mode != "on" {
						t.Errorf("graphs replayed %d steps with %d fallbacks (mode %s), want >= 2 and none: %s; reasons %v",
							stats.Replayed, stats.Fallbacks, stats.Mode, stats, stats.Reasons)
					}
					for i := range losses[0] {
						if math.Float32bits(losses[0][i]) != math.Float32bits(losses[1][i]) {
							t.Errorf("step %d: loss %v eager, %v with graphs: not bit for bit", i+1, losses[0][i], losses[1][i])
						}
					}
					diff := 0
					for i := range params[0] {
						if math.Float32bits(params[0][i]) != math.Float32bits(params[1][i]) {
							if diff == 0 {
								t.Errorf("parameter %d after %d steps: %v eager, %v with graphs", i, len(sizes), params[0][i], params[1][i])
							}
							diff++
						}
					}
					if diff > 0 {
						t.Errorf("%d of %d parameters differ in bits", diff, len(params[0]))
					}
				})
			}
		}
	}
}

// TestCUDAGraphStepTiming times the paper step of both tasks, without and with graphs, when
// GELOATTACK_GPU_TIMING is set (1: bf16; a precision name: that one): the median step (forward,
// backward, clipping, AdamW, the loss read back) over 10 steps after 3 warm-up steps, the calls
// the backend queues a step and the driver calls it makes, and the speed-up.
func TestCUDAGraphStepTiming(t *testing.T) {
	env := os.Getenv("GELOATTACK_GPU_TIMING")
	if env == "" {
		t.Skip("set GELOATTACK_GPU_TIMING=1 to time the paper step with and without CUDA graphs")
	}
	prec := cuda.PrecisionBF16
	if env != "1" {
		prec = env
	}
	base, B, N := graphPreset(t, "paper")
	const warm, timed = 3, 10
	for _, task := range []Task{TaskRetrieval, TaskUnmix} {
		cfg := base
		if task == TaskUnmix {
			cfg = unmixConfig(base, N)
		}
		gb := lazyBatches(cfg, task, B, []int{N, N})
		var med [2]float64
		for k, mode := range []cuda.GraphMode{cuda.GraphsOff, cuda.GraphsOn} {
			g := newGraphTrainer(t, cfg, task, prec, mode, gb)
			for i := range warm {
				g.step(t, i%2)
			}
			if err := g.be.Sync(); err != nil {
				t.Fatal(err)
			}
			c0, s0 := g.be.Calls(), g.be.GraphStats()
			var times []float64
			for i := range timed {
				t0 := time.Now()
				g.step(t, i%2)
				if err := g.be.Sync(); err != nil {
					t.Fatal(err)
				}
				times = append(times, time.Since(t0).Seconds())
			}
			slices.Sort(times)
			med[k] = times[timed/2]
			s1 := g.be.GraphStats()
			calls := float64(g.be.Calls()-c0) / timed
			// Calls outside the recorded steps (clipping, AdamW) go to the driver one by one.
			driver := calls - float64(s1.Commands-s0.Commands)/timed + float64(s1.DriverCalls-s0.DriverCalls)/timed
			t.Logf("paper %s %s, graphs %s: step median %.2f ms (min %.2f), %.0f rows/s; %.0f calls queued a step, %.0f driver calls a step; %d of %d timed steps replayed",
				task, prec, mode, med[k]*1e3, times[0]*1e3, float64(B*N)/med[k], calls, driver, s1.Replayed-s0.Replayed, timed)
		}
		t.Logf("paper %s %s: graphs %.2fx the step without (%.2f ms -> %.2f ms); targets: retrieval <= 12 ms, unmix <= 20 ms (bf16, H100)",
			task, prec, med[0]/med[1], med[0]*1e3, med[1]*1e3)
	}
}
