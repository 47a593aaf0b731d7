package settransformer

import (
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/losses/ot"
)

// stepModel is one model of either task, reduced to what a training step
// needs.
type stepModel struct {
	params *engine.Params
	step   func() (float32, error) // forward and backward of a fixed batch
}

// newStepModel builds the task's model on be: a small encoder (4 layers,
// h 64, 4 heads, d = e = 96), a batch of 3 sets of 20 rows with the last
// rows of set 1 padded.
func newStepModel(t *testing.T, be engine.Backend, task Task) stepModel {
	t.Helper()
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Hidden, cfg.Layers, cfg.Heads, cfg.MLPHidden = 64, 4, 4, 128
	cfg.InputDim, cfg.CandidateDim = 96, 96
	shape := struct{ B, N int }{B: 3, N: 20}
	switch task {
	case TaskRetrieval:
		m, err := New(be, cfg, 7)
		if err != nil {
			t.Fatal(err)
		}
		batch, tg := SyntheticBatch(cfg, shape.B, shape.N, 3)
		batch.Mask = maskTail(shape.B, shape.N, 1, 6)
		return stepModel{m.Params(), func() (float32, error) { return m.ForwardBackward(batch, tg) }}
	default:
		cfg.Task, cfg.DecLayers, cfg.Slots = TaskUnmix, 2, shape.N+4
		loss := ot.DefaultConfig()
		m, err := NewUnmix(be, cfg, 7, WithLoss(loss))
		if err != nil {
			t.Fatal(err)
		}
		batch, tg := SyntheticUnmixBatch(cfg, shape.B, shape.N, 3)
		return stepModel{m.Params(), func() (float32, error) {
			l, err := m.ForwardBackward(batch, tg)
			return l, err
		}}
	}
}

// maskTail is a (B, N) mask with the last pad rows of set b padded.
func maskTail(B, N, b, pad int) []float32 {
	m := make([]float32, B*N)
	for i := range m {
		m[i] = 1
	}
	for i := N - pad; i < N; i++ {
		m[b*N+i] = 0
	}
	return m
}

// TestCUDATrainingStepMatchesCPU runs three whole training steps (forward,
// backward, clipping, AdamW) of both tasks on the CPU and on the GPU from
// the same initial parameters and batch: losses, gradients and parameters
// must agree to 1e-4 relative in fp32, and to the bf16 tolerance (3e-2 on
// losses and gradients; parameters move by at most the learning rate per
// step, so they stay within 1e-4) with bf16 GEMMs.
func TestCUDATrainingStepMatchesCPU(t *testing.T) {
	for _, prec := range []string{cuda.PrecisionFP32, cuda.PrecisionBF16} {
		gpu := cudatest.Open(t, prec)
		lossTol, gradTol, paramTol := 1e-4, 1e-4, 1e-4
		if prec == cuda.PrecisionBF16 {
			// bf16 GEMM inputs keep 8 significant bits: the first step's
			// loss and gradients differ from fp32 by about 1e-2, and after
			// two AdamW updates from those gradients the runs differ by a
			// few percent. AdamW moves every parameter by about the learning
			// rate whatever the gradient's size, so noise in near-zero
			// gradient components shows in the parameters as a few 1e-4.
			lossTol, gradTol, paramTol = 6e-2, 6e-2, 3e-3
		}
		for _, task := range []Task{TaskRetrieval, TaskUnmix} {
			t.Run(prec+"/"+string(task), func(t *testing.T) {
				cpuBe, err := cpu.New(cpu.Config{})
				if err != nil {
					t.Fatal(err)
				}
				ref, dut := newStepModel(t, cpuBe, task), newStepModel(t, gpu, task)
				if err := dut.params.Data().CopyFrom(ref.params.Data().ToHost()); err != nil {
					t.Fatal(err)
				}
				optR, err := engine.NewAdamW(ref.params, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
				if err != nil {
					t.Fatal(err)
				}
				optD, err := engine.NewAdamW(dut.params, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
				if err != nil {
					t.Fatal(err)
				}
				for s := range 3 {
					ref.params.ZeroGrad()
					dut.params.ZeroGrad()
					lr, err := ref.step()
					if err != nil {
						t.Fatal(err)
					}
					ld, err := dut.step()
					if err != nil {
						t.Fatalf("step %d on %s: %v", s, gpu.Name(), err)
					}
					if e := math.Abs(float64(ld-lr)) / math.Abs(float64(lr)); e > lossTol || math.IsNaN(float64(ld)) {
						t.Errorf("step %d: loss %v on the GPU, %v on the CPU (relative error %.2g > %.0g)", s, ld, lr, e, lossTol)
					}
					if e := cudatest.RelL2(dut.params.Grad().ToHost(), ref.params.Grad().ToHost()); e > gradTol || math.IsNaN(e) {
						t.Errorf("step %d: gradient relative L2 error %.2g > %.0g", s, e, gradTol)
					} else {
						t.Logf("step %d: loss %v vs %v, gradient relative L2 error %.2g", s, ld, lr, e)
					}
					nr, nd := engine.ClipGradNorm(ref.params, 1), engine.ClipGradNorm(dut.params, 1)
					if e := math.Abs(nd-nr) / nr; e > gradTol {
						t.Errorf("step %d: gradient norm %v on the GPU, %v on the CPU", s, nd, nr)
					}
					optR.Step()
					optD.Step()
					if err := engine.Sync(gpu); err != nil {
						t.Fatal(err)
					}
				}
				if e := cudatest.RelL2(dut.params.Data().ToHost(), ref.params.Data().ToHost()); e > paramTol {
					t.Errorf("parameters after 3 steps: relative L2 error %.2g > %.0g", e, paramTol)
				}
			})
		}
	}
}

// TestCUDAPaperStepTiming times the paper preset's retrieval step on the GPU
// when GELOATTACK_GPU_TIMING is set (a quick look before `geloattack bench`).
func TestCUDAPaperStepTiming(t *testing.T) {
	if os.Getenv("GELOATTACK_GPU_TIMING") == "" {
		t.Skip("set GELOATTACK_GPU_TIMING=1 to time the paper step on the GPU")
	}
	precs := []string{cuda.PrecisionFP32, cuda.PrecisionTF32, cuda.PrecisionBF16}
	if p := os.Getenv("GELOATTACK_GPU_TIMING"); p != "1" {
		precs = []string{p}
	}
	for _, prec := range precs {
		gpu := cudatest.Open(t, prec)
		cfg, _ := Preset("paper")
		cfg.InputDim, cfg.CandidateDim = 4096, 4096
		m, err := New(gpu, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		shape := struct{ B, N int }{B: 16, N: 256} // the paper step benchmark's batch (stepbench)
		batch, tg := SyntheticBatch(cfg, shape.B, shape.N, 2)
		opt, _ := engine.NewAdamW(m.Params(), engine.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
		step := func() {
			m.Params().ZeroGrad()
			if _, err := m.ForwardBackward(batch, tg); err != nil {
				t.Fatal(err)
			}
			engine.ClipGradNorm(m.Params(), 1)
			opt.Step()
		}
		step()
		step()
		if err := engine.Sync(gpu); err != nil {
			t.Fatal(err)
		}
		up := m.Tape()
		u := up.Input(batch.U, shape.B, shape.N, cfg.InputDim)
		for range 3 {
			t0 := time.Now()
			gpu.Upload(u, batch.U)
			if err := engine.Sync(gpu); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: upload of U (%d MiB): %.2f ms", prec, len(batch.U)>>18, time.Since(t0).Seconds()*1e3)
		}
		var times []float64
		gpu.ProfileReport() // drop what came before
		c0 := gpu.Calls()
		step()
		t.Logf("%s: %d kernel launches and cuBLAS calls per step", prec, gpu.Calls()-c0)
		if r := gpu.ProfileReport(); r != "" {
			t.Logf("%s: one step's device time:\n%s", prec, r)
		}
		for range 10 {
			f0 := gpu.GemmFLOPs()
			t0 := time.Now()
			step()
			if err := engine.Sync(gpu); err != nil {
				t.Fatal(err)
			}
			dt := time.Since(t0).Seconds()
			times = append(times, dt)
			if len(times) == 10 {
				slices.Sort(times)
				med := times[5]
				fl := float64(gpu.GemmFLOPs() - f0)
				t.Logf("%s: paper retrieval step median %.2f ms (min %.2f), %.0f rows/s, %.1f GFLOP/step, %.1f TFLOP/s, peak %d MiB",
					prec, med*1e3, times[0]*1e3, float64(shape.B*shape.N)/med, fl/1e9, fl/med/1e12, gpu.PeakBytes()>>20)
			}
		}
	}
}
