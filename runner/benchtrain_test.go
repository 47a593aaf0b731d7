package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/models/settransformer"
)

// TestBenchTrainRunsTheLoop runs the end-to-end benchmark with the tiny retrieval model on the
// paper-size data (B16 n256 d4096) for 2 timed steps after 1: every step is timed, the sets are
// 256 rows, the loss is finite, and the report names the figures. The unmix config is checked to
// build (its run is the same loop with another task: some 10 s a step with the tiny model).
func TestBenchTrainRunsTheLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("paper-size generation: some seconds")
	}
	cfg, err := BenchTrainConfig(settransformer.TaskUnmix, "paper", 5, "cpu", "fp32", 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model.Slots != 256 || cfg.Model.DecLayers != 2 || cfg.Model.Hidden != 384 {
		t.Fatalf("unmix bench config: slots %d, dec_layers %d, hidden %d", cfg.Model.Slots, cfg.Model.DecLayers, cfg.Model.Hidden)
	}
	for _, task := range []settransformer.Task{settransformer.TaskRetrieval} {
		res, err := BenchTrain(context.Background(), BenchTrainOptions{Task: task, Preset: "tiny", Steps: 2, Warmup: 1, Device: "cpu", Precision: "fp32", Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res.Report())
		if res.B != 16 || res.N != 256 || res.D != 4096 {
			t.Fatalf("%s: B=%d n=%d d=%d, want 16, 256, 4096", task, res.B, res.N, res.D)
		}
		if res.StepMedian <= 0 || res.TaskMedian <= 0 || res.TaskMedian > res.StepMax || res.GenPerExample <= 0 || res.RowsPerSec <= 0 {
			t.Fatalf("%s: implausible timings %+v", task, res)
		}
		if !(res.FirstLoss > 0 && res.LastLoss > 0) {
			t.Fatalf("%s: losses %v, %v", task, res.FirstLoss, res.LastLoss)
		}
		if rep := res.Report(); !strings.Contains(rep, "rows/s with generation") || !strings.Contains(rep, "cores to keep up") {
			t.Fatalf("report lacks its figures:\n%s", rep)
		}
	}
	if _, err := BenchTrain(context.Background(), BenchTrainOptions{Task: settransformer.TaskRetrieval, Steps: 1, Warmup: 1}); err == nil {
		t.Fatal("1 timed step accepted")
	}
}
