//go:build !unix

package settransformer

import "time"

// processCPUTime is unknown off unix: the benchmark reports 0 CPU seconds there.
func processCPUTime() time.Duration { return 0 }
