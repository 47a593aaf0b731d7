package runner

import (
	"context"
	"io"
	"testing"

	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/train"
)

// On a GPU the pre-flight's device estimate (weights, gradients, AdamW moments, activations at the
// largest set) bounds the device memory the backend really held over a paper-size bf16 run (the
// end-to-end benchmark's: B16 n256 d=e=4096, h384 L24) of two training steps, its evaluation and
// its checkpoint, for both tasks, without overstating it more than 3 times. The log line puts the
// two side by side (the GPU bundle's report quotes it). Skips without a GPU.
func TestPreflightDeviceEstimateBoundsPeakCUDA(t *testing.T) {
	if !gpuPresent(t) {
		t.Skip("GPU check not run: no GPU opens here")
	}
	for _, task := range []settransformer.Task{settransformer.TaskRetrieval, settransformer.TaskUnmix} {
		t.Run(string(task), func(t *testing.T) {
			cfg, err := BenchTrainConfig(task, "paper", 2, "cuda", cuda.PrecisionBF16, 2, 2)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			be, ok := s.Backend.(*cuda.Backend)
			if !ok {
				t.Fatalf("device cuda gave %T", s.Backend)
			}
			if _, err := train.Train(context.Background(), train.Run{Dir: t.TempDir(), Options: cfg.Train, Task: s.Task,
				Sampler: s.Sampler, Seed: cfg.Seed, Progress: io.Discard}); err != nil {
				t.Fatal(err)
			}
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			est, peak := s.Estimate.Device(), be.PeakBytes()
			t.Logf("preflight %s paper bf16: device estimate %s (%s), measured peak %s, estimate/peak %.2f",
				task, bytesText(est), s.Estimate, bytesText(peak), float64(est)/float64(peak))
			if peak > est || float64(est) > 3*float64(peak) {
				t.Errorf("device estimate %d bytes, measured peak %d: want peak <= estimate <= 3 x peak", est, peak)
			}
		})
	}
}
