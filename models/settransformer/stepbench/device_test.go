package stepbench

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	st "github.com/gelo-research/geloattack/models/settransformer"
)

// fakeGPU is the CPU backend dressed as a device that counts GEMM FLOPs, reports its peak memory
// and precision and has a name the MFU table knows.
type fakeGPU struct {
	*cpu.Backend
	flops, syncs int64
}

// Unwrap says that the fake's memory is the CPU backend's (engine.Wrapper).
func (f *fakeGPU) Unwrap() engine.Backend { return f.Backend }

func (f *fakeGPU) Name() string      { return "cuda:0 NVIDIA H100 80GB HBM3 (fake); precision bf16" }
func (f *fakeGPU) Precision() string { return "bf16" }
func (f *fakeGPU) PeakBytes() int64  { return 123 << 20 }
func (f *fakeGPU) GemmFLOPs() int64  { return f.flops }
func (f *fakeGPU) Sync() error       { f.syncs++; return nil }
func (f *fakeGPU) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, b *engine.Tensor, beta float32, c *engine.Tensor) {
	f.flops += 2 * int64(batch) * int64(m) * int64(n) * int64(k)
	f.Backend.Gemm(transA, transB, batch, m, n, k, alpha, a, b, beta, c)
}
func (f *fakeGPU) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a *engine.Tensor, sa int, b *engine.Tensor, sb int, beta float32, c *engine.Tensor, sc int) {
	f.flops += 2 * int64(batch) * int64(m) * int64(n) * int64(k)
	f.Backend.GemmStrided(transA, transB, batch, m, n, k, alpha, a, sa, b, sb, beta, c, sc)
}

func TestBenchOnDeviceReportsMemoryFLOPsAndMFU(t *testing.T) {
	cpuBe, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	be := &fakeGPU{Backend: cpuBe}
	res, err := benchmarkStepsOn(context.Background(), be, st.TaskRetrieval, "tiny", 2)
	if err != nil {
		t.Fatal(err)
	}
	if be.syncs == 0 {
		t.Error("the benchmark never synced the device before reading the clock")
	}
	if res.OnCPU || res.Precision != "bf16" || res.DevicePeak != 123<<20 {
		t.Errorf("OnCPU %v precision %q device peak %d", res.OnCPU, res.Precision, res.DevicePeak)
	}
	// Two timed steps of the same batch: the count per step is half the timed total, and at least
	// the input projection's 2·(B·N)·d·h.
	if min := 2.0 * 4 * 64 * 4096 * 128; !(res.GemmFLOPs >= min) || res.GemmFLOPs > float64(be.flops) {
		t.Errorf("GEMM FLOPs per step %g, want >= %g and <= the total %d", res.GemmFLOPs, min, be.flops)
	}
	if res.PeakFLOPS != 989e12 || math.Abs(res.MFU-res.FLOPSPerSec/989e12) > 1e-12 || !(res.MFU > 0) {
		t.Errorf("peak %g MFU %g FLOP/s %g", res.PeakFLOPS, res.MFU, res.FLOPSPerSec)
	}
	rep := res.Report()
	t.Log(rep)
	for _, want := range []string{"on cuda:0 NVIDIA H100", "rows/s", "host CPU time", "peak device memory 123 MiB", "GFLOP/step", "TFLOP/s (bf16)", "of 989 TFLOP/s bf16 peak"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(rep, "dedicated cores") {
		t.Error("a device report speaks of dedicated CPU cores")
	}

	// Through the public entry point, unmix, on a device whose peak is not known: MFU n/a.
	var sb strings.Builder
	other := &unknownGPU{fakeGPU{Backend: cpuBe}}
	if err := RunUnmixWith(context.Background(), Options{Backend: other}, "tiny", 1, &sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "unmix tiny") || !strings.Contains(sb.String(), "MFU n/a") {
		t.Errorf("report %q lacks the task or MFU n/a", sb.String())
	}
}

type unknownGPU struct{ fakeGPU }

func (u *unknownGPU) Name() string { return "cuda:0 NVIDIA A100-SXM4-80GB (fake); precision bf16" }

// The CPU report has no device lines (no device memory, no MFU against a peak it does not know);
// it has the GEMM FLOPs against the sgemm peak it measured.
func TestBenchOnCPUReportsNoDeviceLines(t *testing.T) {
	var sb strings.Builder
	if err := RunWith(context.Background(), Options{}, "tiny", 1, &sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GFLOP/step", "sgemm peak", "of the GEMM limit"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("CPU report lacks %q: %s", want, sb.String())
		}
	}
	for _, not := range []string{"device memory", "MFU", "TFLOP"} {
		if strings.Contains(sb.String(), not) {
			t.Errorf("CPU report mentions %q: %s", not, sb.String())
		}
	}
	if !strings.Contains(sb.String(), "dedicated cores") {
		t.Errorf("CPU report lacks the dedicated-cores throughput: %s", sb.String())
	}
}
