package settransformer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// peakRSS returns the process's peak resident set size in bytes (VmHWM of /proc/self/status).
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: VmHWM %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM line in /proc/self/status")
}

// resetPeakRSS restarts VmHWM from the current RSS (Linux >= 4.0), so one process can measure
// the peaks of several configurations in turn; where it is not allowed the peak stays cumulative.
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
