package train

import (
	"context"
	"io"
	"math"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/tasks"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// mixSpy is a task that records, for each step and each evaluation batch, whether the batch
// carried X and A for the device to mix (Batch.X) or the host's U, and the first step's loss.
type mixSpy struct {
	tasks.Task
	stepDevice, evalDevice []bool
	first                  float64
}

func (s *mixSpy) Step(b *gelo.Batch, step int64) (float64, error) {
	s.stepDevice = append(s.stepDevice, b.X != nil && b.U == nil)
	l, err := s.Task.Step(b, step)
	if step == 0 {
		s.first = l
	}
	return l, err
}

func (s *mixSpy) NewEvaluator() tasks.Evaluator { return &mixSpyEval{s.Task.NewEvaluator(), s} }

type mixSpyEval struct {
	tasks.Evaluator
	spy *mixSpy
}

func (e *mixSpyEval) Add(b *gelo.Batch) error {
	e.spy.evalDevice = append(e.spy.evalDevice, b.X != nil && b.U == nil)
	return e.Evaluator.Add(b)
}

// TestMixOnChoosesWhereUIsFormed: on the CPU backend train.mix_on auto (and "", a config
// recorded before the key) forms U on the host, so CPU runs train what they trained before;
// device hands the steps and the evaluations X and A; the first step's loss (before any update)
// is the same within fptol either way. The run's backend decides auto through
// engine.HostMemory, which the CUDA backend does not implement: there auto is device.
func TestMixOnChoosesWhereUIsFormed(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 30), false)
	run := func(mixOn string) *mixSpy {
		spy := &mixSpy{Task: unmixTestTask(t, s, tasks.UnmixEvalConfig{PoolRows: 200})}
		o := DefaultOptions()
		o.Steps, o.BatchSize, o.WarmupSteps, o.LogEvery, o.EvalEvery, o.EvalBatches, o.CkptEvery = 2, 2, 1, 1, 2, 1, 2
		o.MixOn = mixOn
		if _, err := Train(context.Background(), Run{Dir: t.TempDir(), Options: o, Task: spy, Sampler: s, Progress: io.Discard}); err != nil {
			t.Fatal(err)
		}
		return spy
	}
	all := func(v []bool, want bool) bool {
		for _, x := range v {
			if x != want {
				return false
			}
		}
		return len(v) > 0
	}
	var host float64
	for _, c := range []struct {
		mixOn  string
		device bool
	}{{"auto", false}, {"", false}, {"host", false}, {"device", true}} {
		spy := run(c.mixOn)
		if !all(spy.stepDevice, c.device) || !all(spy.evalDevice, c.device) {
			t.Errorf("mix_on %q on the CPU: steps device-mixed %v, evaluation batches %v; want all %v", c.mixOn, spy.stepDevice, spy.evalDevice, c.device)
		}
		if c.mixOn == "auto" {
			host = spy.first
			continue
		}
		cfg := taskstest.UnmixModel()
		tol := fptol.Chain(2*(cfg.Layers+cfg.DecLayers)+3, max(cfg.InputDim, cfg.Hidden, cfg.MLPHidden), fptol.Float32)
		if math.Abs(spy.first-host) > tol*math.Abs(host) {
			t.Errorf("mix_on %q: first loss %v, host mixing's %v (tol %.3g relative)", c.mixOn, spy.first, host, tol)
		}
	}
}
