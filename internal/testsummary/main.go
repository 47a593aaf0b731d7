// Command testsummary runs `go test ./...` and ends with one line naming the groups of tests that
// skipped (no real store, no real tokenizers, no torch, no browser, no GPU, ...) and what enables
// each. Go's package-list mode prints only "ok" for a passing package and hides its output, skip
// messages included, so a test cannot make its own skip visible; this command reads
// `go test -json` instead and prints the usual lines itself: "ok" and "?" per package, a failing
// package's failed tests and its FAIL lines (all output with -v). scripts/test.sh builds and runs
// it; the README's test command is that script.
//
//	testsummary [go test flags] [packages]
//
// The arguments go to go test; without a package pattern (an argument starting with ./ or ../,
// or ".") it tests ./... . With -json the output is go test's own, unparsed. The exit status is
// go test's.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
)

func main() {
	// Ctrl-C reaches go test and the test binaries by itself (one process group). Catching it
	// here (not ignoring it: an ignored signal would stay ignored in go test) keeps this process
	// alive to print what the packages that finished did.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	os.Exit(run("go", os.Args[1:], os.Stdout, os.Stderr))
}

// run runs goTool's test command with args, renders its events to stdout (build errors and go's
// own messages to stderr) and returns go test's exit status.
func run(goTool string, args []string, stdout, stderr io.Writer) int {
	plan := planArgs(args)
	cmd := exec.Command(goTool, plan.argv...)
	cmd.Stderr = stderr
	if plan.raw {
		cmd.Stdout = stdout
		return exitStatus(cmd.Run(), stderr)
	}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: %s test: %v\n", goTool, err)
		return 2
	}
	r := newRenderer(stdout, stderr, plan.verbose)
	readErr := r.consume(pipe)
	status := exitStatus(cmd.Wait(), stderr)
	if readErr != nil {
		fmt.Fprintf(stderr, "testsummary: reading go test -json: %v\n", readErr)
		if status == 0 {
			status = 2
		}
	}
	r.flushUnfinished()
	if status != 0 {
		fmt.Fprintln(stdout, "FAIL")
	}
	fmt.Fprintln(stdout, r.skips.line(plan.short))
	return status
}

// exitStatus is the exit status of a finished command: its own, or 2 when it did not run.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() >= 0 {
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "testsummary: go test: %v\n", err)
	return 2
}
