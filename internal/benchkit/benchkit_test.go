package benchkit

import (
	"runtime"
	"testing"
)

func TestPeakFLOPS(t *testing.T) {
	for _, c := range []struct {
		name, prec string
		want       float64
	}{
		{"cuda:0 NVIDIA H100 80GB HBM3; precision bf16", "bf16", 989e12},
		{"cuda:0 NVIDIA H100 80GB HBM3; precision tf32", "tf32", 494e12},
		{"cuda:0 NVIDIA H100 80GB HBM3; precision fp32", "fp32", 67e12},
		{"cuda:0 NVIDIA H200; precision bf16", "bf16", 989e12},
		{"cuda:0 NVIDIA H100 PCIe; precision bf16", "bf16", 0},
		{"cuda:0 NVIDIA H100 NVL; precision bf16", "bf16", 0},
		{"cuda:0 NVIDIA A100-SXM4-80GB; precision bf16", "bf16", 0},
		{"cpu (2 workers; OpenBLAS)", "fp32", 0},
	} {
		got, ok := PeakFLOPS(c.name, c.prec)
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("PeakFLOPS(%q, %s) = %g, %v; want %g", c.name, c.prec, got, ok, c.want)
		}
	}
}

// On Linux the peak RSS is read from /proc and is positive; the CPU time of a busy process grows.
func TestPeakRSSAndCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	_ = ResetPeakRSS()
	rss, err := PeakRSS()
	if err != nil || rss <= 0 {
		t.Fatalf("PeakRSS = %d, %v", rss, err)
	}
	c0 := ProcessCPUTime()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i & 3
	}
	if c1 := ProcessCPUTime(); c1 <= c0 || x < 0 {
		t.Errorf("CPU time %v then %v after work", c0, c1)
	}
}
