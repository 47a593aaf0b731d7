package cuda

import "syscall"

// osThread identifies the calling OS thread (its kernel thread id), so that
// the backend makes its context current only on threads it has not seen
// last.
func osThread() int { return syscall.Gettid() }
