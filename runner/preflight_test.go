package runner

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks"
)

// The pre-flight's activation estimate bounds what one step really holds (arena and gradient
// pool) at the largest set size, without overstating it more than 2.5 times (measured: 1.2x), for both tasks.
func TestEstimateBoundsMeasuredActivations(t *testing.T) {
	for _, name := range []string{"retrieval", "unmix"} {
		t.Run(name, func(t *testing.T) {
			cfg := tinyRun(t, "device: cpu\n")
			m := &cfg.Model
			m.Task = settransformer.Task(name)
			m.Hidden, m.Layers, m.Heads, m.MLPHidden = 64, 2, 4, 192
			if name == "unmix" {
				m.DecLayers, m.Slots = 1, 48
			}
			cfg.Sampler.Positives, cfg.Sampler.TokensPerText = gelo.Fixed(3), gelo.Fixed(12)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pipe := gelo.NewFinitePipeline(context.Background(), s.Sampler, data.Train, cfg.Train.BatchSize, 1, 1, 0, 1)
			defer pipe.Close()
			b, err := pipe.Next()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Task.Step(b, 0); err != nil {
				t.Fatal(err)
			}
			var tape *engine.Tape
			switch task := s.Task.(type) {
			case *tasks.Retrieval:
				tape = task.Model().Tape()
			case *tasks.Unmix:
				tape = task.Model().Tape()
			}
			_, peak := tape.ArenaBytes()
			measured := peak + tape.GradPoolBytes()
			est := s.Estimate.Activations
			t.Logf("%s: measured %d bytes, estimated %d (x%.2f)", name, measured, est, float64(est)/float64(measured))
			if est < measured || float64(est) > 2.5*float64(measured) {
				t.Errorf("estimate %d bytes, measured %d: want measured <= estimate <= 2.5 x measured", est, measured)
			}
		})
	}
}

// A config that cannot fit is refused before anything large is allocated, naming the figures; with
// GELOATTACK_SKIP_PREFLIGHT it goes on with a warning.
func TestPreflightRefusesAConfigThatCannotFit(t *testing.T) {
	avail, _, err := hostAvailable()
	if err != nil {
		t.Skip(err)
	}
	// 2M synthetic texts of 4096-wide rows: far beyond any test machine, within the size limits.
	cfg := tinyRun(t, "device: cpu\n")
	cfg.Store.Synth.Texts, cfg.Store.Synth.MinTokens, cfg.Store.Synth.MaxTokens, cfg.Store.Synth.D = 2000000, 512, 512, 4096
	est, err := EstimateRun(cfg, 4096, 8, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if est.Host() <= avail {
		t.Skipf("this machine has %d bytes available, more than the %d the test needs to exceed", avail, est.Host())
	}
	_, err = Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "resource pre-flight") || !strings.Contains(err.Error(), "GiB") ||
		!strings.Contains(err.Error(), "synthetic store") {
		t.Fatalf("Open: %v, want a pre-flight refusal with the estimate", err)
	}
	t.Setenv(SkipPreflightEnv, "1")
	warn, err := est.CheckHost("x")
	if err != nil || !strings.HasPrefix(warn, "warning: resource pre-flight") {
		t.Fatalf("with %s: warning %q, error %v", SkipPreflightEnv, warn, err)
	}
}

func TestHostAvailableReadsMeminfo(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	avail, src, err := hostAvailable()
	if err != nil || avail <= 0 || src == "" {
		t.Fatalf("hostAvailable = %d, %q, %v", avail, src, err)
	}
}
