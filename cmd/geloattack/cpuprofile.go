package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a Go CPU profile written to path (created, or truncated) and returns
// the function that stops it and closes the file, reporting a failure to close on stderr: a
// profile is a diagnostic, and losing it must not turn a finished benchmark into a failed one.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "geloattack: CPU profile %s: %v\n", path, err)
		}
	}, nil
}
