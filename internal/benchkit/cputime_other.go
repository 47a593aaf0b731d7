//go:build !unix

package benchkit

import "time"

// ProcessCPUTime is unknown off unix: the benchmarks report 0 CPU seconds there.
func ProcessCPUTime() time.Duration { return 0 }
