package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo writes a go command that records its arguments, prints testdata/events.jsonl and a
// line on stderr, and exits with status.
func fakeGo(t *testing.T, status string) (tool, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	events, err := filepath.Abs("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	argsFile = filepath.Join(dir, "args")
	tool = filepath.Join(dir, "go")
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\ncat '" + events + "'\necho 'go: from go' >&2\nexit " + status + "\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return tool, argsFile
}

// run passes the arguments to go test with -json and ./..., returns go test's exit status, and
// ends stdout with FAIL (when go test failed) and the one summary line.
func TestRunReturnsGoTestsStatusAndEndsWithTheSummary(t *testing.T) {
	for _, status := range []string{"0", "1", "3"} {
		tool, argsFile := fakeGo(t, status)
		var out, errw bytes.Buffer
		got := run(tool, []string{"-count=1"}, &out, &errw)
		if want := int(status[0] - '0'); got != want {
			t.Errorf("exit status %d, go test's %d", got, want)
		}
		if a, _ := os.ReadFile(argsFile); string(a) != "test -json -count=1 ./...\n" {
			t.Errorf("go got %q", a)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "skipped 2 tests: real store 1") {
			t.Errorf("last line %q, want the summary", last)
		}
		if failed := lines[len(lines)-2] == "FAIL"; failed != (status != "0") {
			t.Errorf("status %s: line before the summary %q", status, lines[len(lines)-2])
		}
		if !strings.Contains(errw.String(), "go: from go\n") {
			t.Errorf("go's stderr not passed on: %q", errw.String())
		}
	}
	var errw bytes.Buffer
	if got := run(filepath.Join(t.TempDir(), "no-go"), nil, &bytes.Buffer{}, &errw); got != 2 || !strings.Contains(errw.String(), "no-go") {
		t.Errorf("a go that does not start: status %d, stderr %q", got, errw.String())
	}
}
