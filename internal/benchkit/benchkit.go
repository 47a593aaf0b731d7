// Package benchkit holds the process and device measurements the benchmarks share: the peak
// resident set size from /proc, the process CPU time, and the dense peak FLOP/s of known GPUs
// that MFU is measured against.
package benchkit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// PeakRSS returns the process's peak resident set size in bytes (VmHWM of /proc/self/status).
func PeakRSS() (int64, error) {
	b, err := safefile.Read("/proc/self/status", safefile.Kernel)
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: VmHWM %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM line in /proc/self/status")
}

// ResetPeakRSS restarts VmHWM from the current RSS (Linux >= 4.0), so one process can measure
// the peaks of several configurations in turn; where it is not allowed the peak stays cumulative.
func ResetPeakRSS() error {
	return safefile.WriteKernel("/proc/self/clear_refs", []byte("5"))
}

// PeakFLOPS is the dense peak FLOP/s of the device a backend name describes at a GEMM precision,
// and false when it is not known. Known: the H100 SXM and the H200 (same GH100 compute: bf16
// 989e12, tf32 494e12, fp32 67e12), named "... H100 ..." or "... H200 ..." without "PCIe" or
// "NVL" (those variants are clocked lower).
func PeakFLOPS(backendName, precision string) (float64, bool) {
	if !(strings.Contains(backendName, "H100") || strings.Contains(backendName, "H200")) ||
		strings.Contains(backendName, "PCIe") || strings.Contains(backendName, "NVL") {
		return 0, false
	}
	switch precision {
	case "bf16":
		return 989e12, true
	case "tf32":
		return 494e12, true
	case "fp32", "":
		return 67e12, true
	}
	return 0, false
}
