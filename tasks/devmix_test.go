package tasks

import (
	"context"
	"math"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// mixTol bounds the relative difference of a loss (or a continuous metric) between host and
// device mixing of the same batch: U differs by the summation order of sums of nx terms, which
// passes through the model's chain of products (two per layer, the projections in and out, the
// loss).
func mixTol(cfg settransformer.Config, nx int) float64 {
	return fptol.Chain(2*(cfg.Layers+cfg.DecLayers)+3, max(nx, cfg.InputDim, cfg.Hidden, cfg.MLPHidden), fptol.Float32)
}

// stepBoth runs step on batches j of a host-mixing and a device-mixing pipeline over s (padded
// to a multiple of 3 rows, so sets have masked rows), and checks the losses agree within tol.
func stepBoth(t *testing.T, s *gelo.Sampler, bs int, cfg settransformer.Config, step func(*gelo.Batch, int64) (float64, error)) {
	t.Helper()
	host := gelo.NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 3, gelo.PadTo(3))
	dev := gelo.NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 3, gelo.PadTo(3), gelo.MixOnDevice())
	defer host.Close()
	defer dev.Close()
	for j := int64(0); j < 3; j++ {
		hb, err := host.Next()
		if err != nil {
			t.Fatal(err)
		}
		db, err := dev.Next()
		if err != nil {
			t.Fatal(err)
		}
		if db.X == nil || db.U != nil {
			t.Fatalf("batch %d of the device pipeline carries no X, or U", j)
		}
		lh, err := step(hb, j)
		if err != nil {
			t.Fatal(err)
		}
		ld, err := step(db, j)
		if err != nil {
			t.Fatal(err)
		}
		if tol := mixTol(cfg, db.NX); math.Abs(ld-lh) > tol*math.Abs(lh) || lh == 0 {
			t.Errorf("batch %d: loss %v with device mixing, %v with host mixing (tol %.3g relative)", j, ld, lh, tol)
		}
	}
}

// TestRetrievalDeviceMixingMatchesHost: on the CPU backend a retrieval step on a device-mixed
// batch gives the host-mixed batch's loss within fptol, and an evaluation with device mixing the
// host one's positive mass.
func TestRetrievalDeviceMixingMatchesHost(t *testing.T) {
	task, s := retrievalTestTask(t, 2)
	stepBoth(t, s, 3, task.Model().Config(), task.Step)
	spec := EvalSpec{BatchSize: 3, Batches: 2, Workers: 2, Prefetch: 2, Bucket: 3}
	hm, err := Evaluate(context.Background(), s, task, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.MixOnDevice = true
	dm, err := Evaluate(context.Background(), s, task, spec)
	if err != nil {
		t.Fatal(err)
	}
	tol := mixTol(task.Model().Config(), 0) // sets of at most 16 rows: the model's widths are larger
	for _, split := range []string{"train", "val"} {
		h, d := hm[split]["pos_mass"], dm[split]["pos_mass"]
		if h == 0 || math.Abs(h-d) > tol*h {
			t.Errorf("%s pos_mass %v with device mixing, %v with host mixing", split, d, h)
		}
	}
}

// TestUnmixDeviceMixingMatchesHost: the unmix step likewise (its rows packed through A).
func TestUnmixDeviceMixingMatchesHost(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), true)
	task := unmixTestTask(t, s, UnmixEvalConfig{})
	stepBoth(t, s, 1, taskstest.UnmixModel(), task.Step)
	stepBoth(t, s, 3, taskstest.UnmixModel(), task.Step)
}
