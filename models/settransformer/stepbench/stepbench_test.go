package stepbench

import (
	"context"
	"strings"
	"testing"

	st "github.com/gelo-research/geloattack/models/settransformer"
)

// BenchmarkTrainStep times full training steps (forward, backward, clip, AdamW) at the shapes of
// the throughput targets. Run the paper size briefly: go test -bench TrainStep/paper -benchtime 3x.
func BenchmarkTrainStep(b *testing.B) { benchmarkTask(b, st.TaskRetrieval) }

// BenchmarkUnmixStep is BenchmarkTrainStep for the unmixing model (see RunUnmix):
// go test -bench UnmixStep/paper -benchtime 3x.
func BenchmarkUnmixStep(b *testing.B) { benchmarkTask(b, st.TaskUnmix) }

func benchmarkTask(b *testing.B, task st.Task) {
	for _, preset := range []string{"tiny", "small", "paper"} {
		b.Run(preset, func(b *testing.B) {
			res, err := benchmarkSteps(context.Background(), task, preset, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.RowsPerSec, "rows/s")
			b.ReportMetric(float64(res.PeakRSS)/(1<<20), "peakRSS_MiB")
			b.ReportMetric(res.StepSeconds, "s/step")
			b.ReportMetric(res.CPURowsPerSec, "cpu-rows/s")
			b.ReportMetric(0, "ns/op") // the step time above is the meaningful figure
		})
	}
}

// TestRun: the benchmark entry point reports a positive throughput for one tiny step, stops on
// a cancelled context, and refuses an unknown preset and a step count below one.
func TestRun(t *testing.T) {
	var sb strings.Builder
	if err := Run(context.Background(), "tiny", 1, &sb); err != nil {
		t.Fatal(err)
	}
	t.Log(sb.String())
	if !strings.Contains(sb.String(), "rows/s") || strings.Contains(sb.String(), " 0.0 rows/s") {
		t.Errorf("report lacks a throughput: %q", sb.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, "tiny", 1, &sb); err == nil {
		t.Error("cancelled context: benchmark ran")
	}
	if err := Run(context.Background(), "huge", 1, &sb); err == nil {
		t.Error("unknown preset accepted")
	}
	if err := Run(context.Background(), "tiny", 0, &sb); err == nil {
		t.Error("zero steps accepted")
	}
}

// TestRunUnmix: the unmix benchmark runs one tiny step, names its shape and reports a
// throughput.
func TestRunUnmix(t *testing.T) {
	var sb strings.Builder
	if err := RunUnmix(context.Background(), "tiny", 1, &sb); err != nil {
		t.Fatal(err)
	}
	t.Log(sb.String())
	if !strings.Contains(sb.String(), "unmix tiny") || !strings.Contains(sb.String(), "S=64") ||
		!strings.Contains(sb.String(), "rows/s") || strings.Contains(sb.String(), " 0.0 rows/s") {
		t.Errorf("report lacks the task, the shape or a throughput: %q", sb.String())
	}
	if err := RunUnmix(context.Background(), "huge", 1, &sb); err == nil {
		t.Error("unknown preset accepted")
	}
}
