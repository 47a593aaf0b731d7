package main

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// skipGroup is one reason tests skip and what enables them.
type skipGroup struct {
	name   string   // as the summary line names it
	enable string   // the script, package or setting that enables the tests
	marks  []string // substrings of a skip message that put a test in the group
}

// skipGroups are the reasons tests of this repository skip, matched against each skipped test's
// message in this order (the first group with a mark in the message takes it). The marks are the
// scripts and variables the skip messages name, so a new test that names them is counted too.
func skipGroups() []skipGroup {
	return []skipGroup{
		{"real store", "scripts/build-small-store.sh", []string{"build-small-store.sh", "GELOATTACK_SMALL_STORE"}},
		{"real tokenizers", "scripts/fetch-tokenizers.sh", []string{"fetch-tokenizers.sh", "GELOATTACK_TOKENIZERS"}},
		{"model and corpora", "scripts/fetch-data.sh", []string{"fetch-data.sh", "no model cache"}},
		{"torch", "apt-get install python3-torch python3-numpy", []string{"no torch", "bench/torch_"}},
		{"browser", "apt-get install chromium", []string{"chromium", "GELOATTACK_REQUIRE_BROWSER"}},
		{"g++", "apt-get install g++", []string{"no g++"}},
		{"GPU", "an NVIDIA GPU, docs/gpu.md", []string{"GPU check not run", "no CUDA", "cuBLAS", "build-ptx.sh", "no GPU"}},
		{"without a GPU", "a machine without one", []string{"has a GPU"}},
		{"OpenBLAS", "apt-get install libopenblas0", []string{"OpenBLAS", "LAPACK"}},
	}
}

// envVar finds a variable such as GELOATTACK_PAPER_TABLES in a skip message: an opt-in test
// (a benchmark, a long sweep) that says which variable runs it.
var envVar = regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b`)

// location is the "file_test.go:12: " that starts each line a test logs.
var location = regexp.MustCompile(`(?m)^[ \t]*[\w.-]+\.go:\d+: `)

// skipTally counts skipped tests by group.
type skipTally struct {
	total   int
	byGroup map[string]int
	others  []string // package.Test of the skips no group explains
}

// add counts one skipped test with what it printed.
func (t *skipTally) add(pkg, test, msg string) {
	if t.byGroup == nil {
		t.byGroup = map[string]int{}
	}
	t.total++
	// The file:line that t.Skip prefixes names the test file, not the reason
	// (torch_crosscheck_test.go skips for want of a variable, not of torch).
	msg = location.ReplaceAllString(msg, "")
	for _, g := range skipGroups() {
		for _, m := range g.marks {
			if strings.Contains(msg, m) {
				t.byGroup[g.name]++
				return
			}
		}
	}
	if envVar.MatchString(msg) {
		t.byGroup[optIn]++
		return
	}
	t.others = append(t.others, path.Base(pkg)+"."+test)
}

// optIn names the group of tests that run when a variable is set.
const optIn = "opt-in"

// line is the one summary line: how many tests skipped, by group, each with what enables it.
// Under -short the skips no group explains are counted as the long tests it skips.
func (t *skipTally) line(short bool) string {
	if t.total == 0 {
		return "skipped: none"
	}
	var parts []string
	for _, g := range skipGroups() {
		if n := t.byGroup[g.name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%s)", g.name, n, g.enable))
		}
	}
	if n := t.byGroup[optIn]; n > 0 {
		parts = append(parts, fmt.Sprintf("%s %d (set the variable each names)", optIn, n))
	}
	if n := len(t.others); n > 0 {
		switch {
		case short:
			parts = append(parts, fmt.Sprintf("long %d (run without -short)", n))
		default:
			eg := t.others[:min(n, 2)]
			parts = append(parts, fmt.Sprintf("other %d (e.g. %s; -v shows why)", n, strings.Join(eg, ", ")))
		}
	}
	noun := "tests"
	if t.total == 1 {
		noun = "test"
	}
	return fmt.Sprintf("skipped %d %s: %s", t.total, noun, strings.Join(parts, ", "))
}
