//go:build !linux

package cuda

// osThread returns -1 where thread ids are not available: the backend then
// makes its context current on every call.
func osThread() int { return -1 }
