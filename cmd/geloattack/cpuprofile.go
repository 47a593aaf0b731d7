package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// startCPUProfile starts a Go CPU profile written atomically to path (through safefile, so it
// never overwrites an input or follows a link) and returns the function that stops it and puts
// the file in place, reporting a failure on stderr: a profile is a diagnostic, and losing it must
// not turn a finished benchmark into a failed one.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := new(safefile.Files).CreateAtomic(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Commit(); err != nil {
			fmt.Fprintf(os.Stderr, "geloattack: CPU profile %s: %v\n", path, err)
		}
	}, nil
}
