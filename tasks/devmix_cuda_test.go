package tasks

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// gaussCorpus is texts texts of minTok..maxTok standard normal rows of width d, embeddings of
// width e, text ids from 100.
func gaussCorpus(t testing.TB, texts, minTok, maxTok, d, e int, seed uint64) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	c := data.NewMemCorpus(d, e)
	for i := range texts {
		rows := make([]float32, (minTok+rng.IntN(maxTok-minTok+1))*d)
		for j := range rows {
			rows[j] = float32(rng.NormFloat64())
		}
		emb := make([]float32, e)
		for j := range emb {
			emb[j] = float32(rng.NormFloat64())
		}
		if err := c.Add(int64(100+i), rows, emb); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestDeviceMixMatchesHostCUDA: the U a GPU forms from a MixOnDevice batch (engine.Tape.MixRows on
// the CUDA backend in bf16 precision, whose mixing must stay fp32) against the U the sampler's
// workers form with the host's BLAS, on odd shapes (d 13, ranged set sizes padded to a multiple
// of 5, observed fraction 0.9, batches of 1 and 3), for observe_dtype none, bf16 and fp16: each
// element within twice gamma_NX of its products' magnitudes (two fp32 sums in unknown orders),
// plus one unit of the observe format where U is rounded.
func TestDeviceMixMatchesHostCUDA(t *testing.T) {
	gpu := cudatest.Open(t, cuda.PrecisionBF16) // skips without a GPU
	t.Logf("mix.cu's rounding kernel loaded: %v", gpu.RoundsObserveOnDevice())
	const d = 13
	c := gaussCorpus(t, 40, 6, 20, d, 4, 41)
	for _, observe := range []gelo.ObserveDtype{gelo.ObserveNone, gelo.ObserveBF16, gelo.ObserveFP16} {
		for _, bs := range []int{1, 3} {
			cfg := gelo.DefaultConfig()
			cfg.ValFrac, cfg.ObserveDtype = 0.3, observe
			cfg.Positives, cfg.TokensPerText = gelo.Uniform(1, 3), gelo.Uniform(4, 12)
			cfg.ShieldFrac, cfg.ObsRows = gelo.Uniform(0, 0.5), 0.9
			s, err := gelo.NewSampler(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			host := gelo.NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 3, gelo.PadTo(5))
			dev := gelo.NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 3, gelo.PadTo(5), gelo.MixOnDevice())
			worst := 0.0
			for range 3 {
				hb, err := host.Next()
				if err != nil {
					t.Fatal(err)
				}
				db, err := dev.Next()
				if err != nil {
					t.Fatal(err)
				}
				tp := engine.NewTape(gpu)
				u := tp.MixRows(tp.Input(db.A, db.B, db.N, db.NX), tp.Input(db.X, db.B, db.NX, d), MixRound(db.Observe))
				if err := tp.Err(); err != nil {
					t.Fatal(err)
				}
				got := u.ToHost()
				if err := engine.Sync(gpu); err != nil {
					t.Fatal(err)
				}
				worst = max(worst, compareMixed(t, got, hb, db, observe))
			}
			host.Close()
			dev.Close()
			t.Logf("observe %s, B %d: worst difference %.3g of the bound", observe, bs, worst)
		}
	}
}

// compareMixed checks a device-formed U against the host batch's and returns the largest
// difference as a fraction of its bound.
func compareMixed(t *testing.T, got []float32, hb, db *gelo.Batch, observe gelo.ObserveDtype) float64 {
	t.Helper()
	B, n, nx, d := db.B, db.N, db.NX, db.D
	unit := map[gelo.ObserveDtype]float64{gelo.ObserveNone: 0, gelo.ObserveBF16: 0x1p-7, gelo.ObserveFP16: 0x1p-10}[observe]
	worst := 0.0
	for b := range B {
		for i := range n {
			for l := range d {
				var mag float64
				for k := range nx {
					mag += math.Abs(float64(db.A[(b*n+i)*nx+k]) * float64(db.X[(b*nx+k)*d+l]))
				}
				w, g := float64(hb.U[(b*n+i)*d+l]), float64(got[(b*n+i)*d+l])
				tol := 2 * fptol.Gamma(nx, fptol.Float32) * mag
				if observe != gelo.ObserveNone {
					tol += unit*(math.Abs(w)+tol) + 0x1p-24
				}
				diff := math.Abs(g - w)
				if !(diff <= tol) {
					t.Fatalf("batch %d set %d row %d col %d: U %g on the GPU, %g on the host: off by %g > %g",
						hb.Index, b, i, l, g, w, diff, tol)
				}
				if tol > 0 {
					worst = max(worst, diff/tol)
				}
			}
		}
	}
	return worst
}

// TestMixTimingCUDA times, when GELOATTACK_GPU_TIMING is set, the paper-size retrieval training
// step in bf16 with its batches from the pipeline (GOMAXPROCS-2 workers): with U formed by the
// workers (host mixing) and on the GPU (device mixing), the same run. Per mode: rows/s, the time
// Next waited for a batch and the step's time, over 12 steps after 3 of warm-up; the shape of
// bench -what train's (n 256, B 16, d 4096), on a smaller corpus.
func TestMixTimingCUDA(t *testing.T) {
	if os.Getenv("GELOATTACK_GPU_TIMING") == "" {
		t.Skip("set GELOATTACK_GPU_TIMING=1 to time host against device mixing on the GPU")
	}
	gpu := cudatest.Open(t, cuda.PrecisionBF16)
	const d, e, bs = 4096, 384, 16
	c := gaussCorpus(t, 48, 64, 80, d, e, 42)
	cfg := gelo.DefaultConfig()
	cfg.ValFrac, cfg.Mix = 0.25, gelo.MixOrthogonal
	cfg.Positives, cfg.TokensPerText, cfg.ShieldFrac = gelo.Fixed(4), gelo.Fixed(58), gelo.Fixed(0.1) // n = 256
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := settransformer.Preset("paper")
	if err != nil {
		t.Fatal(err)
	}
	mcfg.InputDim, mcfg.CandidateDim = d, e
	m, err := settransformer.New(gpu, mcfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	task := NewRetrieval(m, s, 0, 5)
	opt, err := engine.NewAdamW(m.Params(), engine.AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	workers := max(runtime.GOMAXPROCS(0)-2, 1)
	for _, mode := range []string{"host", "device"} {
		opts := []gelo.PipelineOption{}
		if mode == "device" {
			opts = append(opts, gelo.MixOnDevice())
		}
		pipe := gelo.NewPipeline(context.Background(), s, data.Train, bs, workers, 4, 0, opts...)
		var wait, step time.Duration
		var rows int
		var t0 time.Time
		for j := range 15 {
			if j == 3 {
				if err := engine.Sync(gpu); err != nil {
					t.Fatal(err)
				}
				t0, wait, step, rows = time.Now(), 0, 0, 0
			}
			w0 := time.Now()
			b, err := pipe.Next()
			if err != nil {
				t.Fatal(err)
			}
			s0 := time.Now()
			m.Params().ZeroGrad()
			if _, err := task.Step(b, int64(j)); err != nil {
				t.Fatal(err)
			}
			engine.ClipGradNorm(m.Params(), 1)
			opt.Step()
			if err := engine.Sync(gpu); err != nil {
				t.Fatal(err)
			}
			wait, step = wait+s0.Sub(w0), step+time.Since(s0)
			for _, real := range b.Mask {
				if real {
					rows++
				}
			}
		}
		pipe.Close()
		el := time.Since(t0).Seconds()
		t.Logf("mix on %s: %.0f rows/s (%d workers), %.1f ms a step, of which %.1f ms waiting for the batch and %.1f ms in the step",
			mode, float64(rows)/el, workers, el/12*1e3, wait.Seconds()/12*1e3, step.Seconds()/12*1e3)
	}
}
