package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the build events go test
// adds: "build-output" and "build-fail", named by ImportPath).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// chunk is one output event of a package, kept until the package ends.
type chunk struct {
	test string // "" for the package's own lines
	text string
}

// pkgLog is what a package printed so far and how its tests ended.
type pkgLog struct {
	chunks []chunk
	ended  map[string]string // test -> pass, fail or skip
}

// renderer turns the event stream into go test's package-list lines: one line per passing or
// test-less package, a failing package's failed tests and FAIL lines, everything with -v. Each
// package is printed whole when it ends, so packages never interleave.
type renderer struct {
	out, errw io.Writer
	verbose   bool
	pkgs      map[string]*pkgLog
	order     []string // packages in the order they started, for the ones that never end
	skips     skipTally
}

func newRenderer(out, errw io.Writer, verbose bool) *renderer {
	return &renderer{out: out, errw: errw, verbose: verbose, pkgs: map[string]*pkgLog{}}
}

// consume reads events until r ends. A line that is not an event is printed as it is.
func (r *renderer) consume(rd io.Reader) error {
	dec := json.NewDecoder(rd)
	for {
		var ev event
		err := dec.Decode(&ev)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// Not JSON (go test never writes such a line on stdout with -json; print it rather
			// than lose it): show the rest as it is.
			rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), rd))
			r.out.Write(rest)
			return err
		}
		r.handle(ev)
	}
}

func (r *renderer) handle(ev event) {
	switch ev.Action {
	case "build-output":
		fmt.Fprint(r.errw, ev.Output)
		return
	case "build-fail":
		return
	}
	if ev.Package == "" {
		fmt.Fprint(r.out, ev.Output)
		return
	}
	p := r.pkgs[ev.Package]
	if p == nil {
		p = &pkgLog{ended: map[string]string{}}
		r.pkgs[ev.Package] = p
		r.order = append(r.order, ev.Package)
	}
	switch ev.Action {
	case "output":
		p.chunks = append(p.chunks, chunk{ev.Test, ev.Output})
	case "pass", "fail", "skip":
		if ev.Test != "" {
			p.ended[ev.Test] = ev.Action
			if ev.Action == "skip" {
				r.skips.add(ev.Package, ev.Test, p.testOutput(ev.Test))
			}
			return
		}
		r.print(p, ev.Action)
		delete(r.pkgs, ev.Package)
	}
}

// testOutput is what test printed, without the lines go test adds around it.
func (p *pkgLog) testOutput(test string) string {
	var b strings.Builder
	for _, c := range p.chunks {
		if c.test == test && !isFrameLine(c.text) {
			b.WriteString(c.text)
		}
	}
	return b.String()
}

// isFrameLine reports the lines test2json's verbose stream adds that package-list mode hides.
func isFrameLine(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// print writes a package that ended with action.
func (r *renderer) print(p *pkgLog, action string) {
	for _, c := range p.chunks {
		switch {
		case r.verbose:
		case c.test == "":
			// The package's own lines: its "ok", "?" or FAIL lines, and a failing binary's
			// panic or timeout; a passing package's other output is hidden, as go test hides it.
			if action == "pass" && !strings.HasPrefix(c.text, "ok ") {
				continue
			}
			if c.text == "PASS\n" {
				continue
			}
		case p.ended[c.test] == "fail" || (action == "fail" && p.ended[c.test] == ""):
			// A failed test's lines, and those of a test that never ended (a panic, a timeout).
			if isFrameLine(c.text) {
				continue
			}
		default:
			continue
		}
		fmt.Fprint(r.out, indent(c))
	}
}

// indent shifts a subtest's line right by four spaces per level, as go test prints it (its
// "=== RUN" lines stay at the margin).
func indent(c chunk) string {
	depth := strings.Count(c.test, "/")
	if depth == 0 || c.text == "" || strings.HasPrefix(c.text, "=== ") {
		return c.text
	}
	return strings.Repeat("    ", depth) + c.text
}

// flushUnfinished prints the packages that started but never ended (go test was interrupted or
// died), as failures.
func (r *renderer) flushUnfinished() {
	left := make([]string, 0, len(r.pkgs))
	for _, name := range r.order {
		if _, ok := r.pkgs[name]; ok {
			left = append(left, name)
		}
	}
	sort.Strings(left)
	for _, name := range left {
		r.print(r.pkgs[name], "fail")
		fmt.Fprintf(r.out, "FAIL\t%s (did not finish)\n", name)
		delete(r.pkgs, name)
	}
}
