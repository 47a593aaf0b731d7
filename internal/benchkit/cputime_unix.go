//go:build unix

package benchkit

import (
	"syscall"
	"time"
)

// ProcessCPUTime is the user plus system CPU time the process has used, summed over its threads
// (OpenBLAS's included); a throughput measure that a loaded machine distorts less than wall time.
// It is 0 when unreadable.
func ProcessCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
