package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// testdata/events.jsonl is `go test -json ./...` of go1.26 over a module of four packages (times
// removed): x/a passes with a skipped test and a skipped subtest and prints from TestMain, x/b
// fails in a subtest beside a passing test that logs, x/c does not build, x/e has no tests. The
// rendering is go test's package-list output: one line per passing or test-less package (their
// output hidden), a failed test's lines with its subtest's indented, the build error on stderr.
func TestRenderIsPackageListOutput(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	r := newRenderer(&out, &errw, false)
	if err := r.consume(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	r.flushUnfinished()
	want := "ok  \tx/a\t(cached)\n" +
		"FAIL\tx/c [build failed]\n" +
		"?   \tx/e\t[no test files]\n" +
		"    b_test.go:3: log b\n" +
		"        b_test.go:3: bad\n" +
		"    --- FAIL: TestB/s (0.00s)\n" +
		"--- FAIL: TestB (0.00s)\n" +
		"FAIL\n" +
		"FAIL\tx/b\t0.003s\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
	}
	if wantErr := "# x/c [x/c.test]\nc/c_test.go:3:27: undefined: undefined\n"; errw.String() != wantErr {
		t.Errorf("stderr %q, want the build output %q", errw.String(), wantErr)
	}
	if got, want := r.skips.line(false), "skipped 2 tests: real store 1 (scripts/build-small-store.sh), GPU 1 (an NVIDIA GPU, docs/gpu.md)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// With -v every line of every package is shown, passing tests' logs and TestMain's line included.
func TestRenderVerboseShowsEverything(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := newRenderer(&out, &bytes.Buffer{}, true)
	if err := r.consume(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"from main\n", "=== RUN   TestA\n", "    a_test.go:4: hello\n", "        a_test.go:6: GPU check not run: no GPU\n",
		"    b_test.go:4: fine\n", "--- PASS: TestOK", "PASS\nok  \tx/a\t(cached)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-v output lacks %q:\n%s", want, out.String())
		}
	}
}

// A package whose binary never reports its end (go test interrupted, the binary killed) is
// printed as a failure with the output of its unfinished test; a line that is not JSON is passed
// through and reported.
func TestRenderUnfinishedAndNonJSON(t *testing.T) {
	stream := `{"Action":"start","Package":"x/p"}
{"Action":"output","Package":"x/p","Test":"TestLong","Output":"=== RUN   TestLong\n"}
{"Action":"output","Package":"x/p","Test":"TestLong","Output":"    p_test.go:9: step 1\n"}
{"Action":"output","Package":"x/p","Test":"TestOK","Output":"    p_test.go:3: passing log\n"}
{"Action":"pass","Package":"x/p","Test":"TestOK"}
`
	var out bytes.Buffer
	r := newRenderer(&out, &bytes.Buffer{}, false)
	if err := r.consume(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.flushUnfinished()
	if want := "    p_test.go:9: step 1\nFAIL\tx/p (did not finish)\n"; out.String() != want {
		t.Errorf("unfinished package:\n%q\nwant\n%q", out.String(), want)
	}

	out.Reset()
	r = newRenderer(&out, &bytes.Buffer{}, false)
	err := r.consume(strings.NewReader("{\"Action\":\"start\",\"Package\":\"x/q\"}\nnot json\nmore\n"))
	if err == nil || !strings.Contains(out.String(), "not json\nmore\n") {
		t.Errorf("non-JSON line: error %v, output %q", err, out.String())
	}
}
