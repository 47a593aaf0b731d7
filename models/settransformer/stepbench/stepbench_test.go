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

// TestGemmFLOPsHandCount: one tiny retrieval step (B4 n64, h128 L2 4 heads, SwiGLU 512,
// d = e = 4096; R = B(n+1) = 260 rows in the blocks, with the CLS row) counts exactly the GEMM FLOPs of a hand
// count, and the step's share of the measured GEMM limit is a fraction in (0, 1.2] (1.2: the
// peak is a best of a few runs, the step's GEMMs one run each).
func TestGemmFLOPsHandCount(t *testing.T) {
	res, err := benchmarkSteps(context.Background(), st.TaskRetrieval, "tiny", 1)
	if err != nil {
		t.Fatal(err)
	}
	const B, n, h, L, mlp, d, e = 4, 64, 128, 2, 512, 4096, 4096
	const R, C = B * (n + 1), 2 * B // rows with CLS; in-batch candidates
	want := 2*2*B*n*d*h +           // input projection of the n rows (before CLS): forward and dW (U needs no gradient)
		L*(3*2*R*h*(4*h+3*mlp)+ // q, k, v, o, gate, up, down: forward, dX, dW
			(2+5)*2*B*(n+1)*(n+1)*h) + // attention: 2 products forward, 5 backward, over all heads
		3*2*B*h*e + // retrieval head: forward, dX, dW
		2*2*B*C*e // cosine scores: forward and dQ (candidates are data)
	if res.GemmFLOPs != float64(want) {
		t.Errorf("tiny step: %.0f GEMM FLOPs, hand count %d", res.GemmFLOPs, want)
	}
	if !(res.GemmFraction > 0 && res.GemmFraction <= 1.2) {
		t.Errorf("share of the GEMM limit %v, want in (0, 1.2]", res.GemmFraction)
	}
	if !(res.GemmFractionCPU > 0) {
		t.Errorf("share of the GEMM limit by CPU time %v, want > 0", res.GemmFractionCPU)
	}
	if rep := res.Report(); !strings.Contains(rep, "of the GEMM limit") {
		t.Errorf("report lacks the GEMM limit: %q", rep)
	}
}
