package main

import (
	"strings"
	"testing"
)

// The skip messages of this repository's tests (as they print them) fall in the group that names
// what enables them; a message naming nothing known is "other" with its test named, or "long"
// under -short.
func TestSkipGroupsOfTheRepositorysMessages(t *testing.T) {
	for _, c := range []struct{ msg, group string }{
		{"realstore_test.go:28: no real store at /x (build it with scripts/build-small-store.sh)", "real store"},
		{"content_test.go:30: no /c/stores/small (build it with scripts/build-small-store.sh)", "real store"},
		{"oracle_test.go:55: no llama3 tokenizer; run scripts/fetch-tokenizers.sh (and scripts/fetch-data.sh corpus) to run it", "real tokenizers"},
		{"bert_test.go:22: model not downloaded (stat x: no such file); run scripts/fetch-data.sh model", "model and corpora"},
		{"main_test.go:445: needs the MiniLM model at /x/config.json (scripts/fetch-data.sh model)", "model and corpora"},
		{"torchcheck.go:31: /usr/bin/python3 has no torch (exit status 1: ModuleNotFoundError)", "torch"},
		{"torchcheck.go:31: ../../bench/torch_lm.py not present: stat: no such file", "torch"},
		{"assess_test.go:156: no /usr/bin/chromium (set GELOATTACK_REQUIRE_BROWSER=1 to require it)", "browser"},
		{"cuda_test.go:230: no g++: kernel syntax not checked (scripts/build-ptx.sh checks it with nvcc)", "g++"},
		{"cudatest.go:17: GPU check not run: no CUDA device: libcuda.so.1 not found", "GPU"},
		{"backend_test.go:206: no CUDA driver: x", "GPU"},
		{"crosscheck_lm_test.go:479: no lm.ptx loaded: the four LM ops are refused (build it with scripts/build-ptx.sh)", "GPU"},
		{"device_test.go:85: this machine has a GPU", "without a GPU"},
		{"blas_test.go:61: no OpenBLAS on this machine: x", "OpenBLAS"},
		{"mixing_test.go:145: no LAPACK in gonum", "OpenBLAS"},
		{"paper_tables_test.go:23: set GELOATTACK_PAPER_TABLES=1 to run (minutes)", optIn},
		{"torch_crosscheck_test.go:204: GELOATTACK_CROSSCHECK_MODEL not set", optIn},
		{"numfmt_test.go:232: set NUMFMT_EXHAUSTIVE=1 to check every float32", optIn},
	} {
		var tally skipTally
		tally.add("example.com/m/p", "TestX", c.msg)
		if tally.byGroup[c.group] != 1 || tally.total != 1 {
			t.Errorf("%q: groups %v, others %v; want %s", c.msg, tally.byGroup, tally.others, c.group)
		}
	}
	var tally skipTally
	tally.add("example.com/m/sweep", "TestTrains", "sweep_test.go:46: trains 8 tiny models")
	if got, want := tally.line(false), "skipped 1 test: other 1 (e.g. sweep.TestTrains; -v shows why)"; got != want {
		t.Errorf("unknown reason: %q, want %q", got, want)
	}
	if got, want := tally.line(true), "skipped 1 test: long 1 (run without -short)"; got != want {
		t.Errorf("unknown reason under -short: %q, want %q", got, want)
	}
}

// The summary is one line, groups in the table's order whatever order the skips came in, each with
// its count and what enables it; no skip says so.
func TestSkipLine(t *testing.T) {
	var none skipTally
	if got := none.line(false); got != "skipped: none" {
		t.Errorf("no skips: %q", got)
	}
	var tally skipTally
	for _, m := range []string{"no /usr/bin/chromium", "set X_Y=1", "run scripts/fetch-tokenizers.sh", "scripts/build-small-store.sh",
		"scripts/build-small-store.sh", "why not", "also not", "and not"} {
		tally.add("m/p", "T", m)
	}
	want := "skipped 8 tests: real store 2 (scripts/build-small-store.sh), real tokenizers 1 (scripts/fetch-tokenizers.sh), " +
		"browser 1 (apt-get install chromium), opt-in 1 (set the variable each names), other 3 (e.g. p.T, p.T; -v shows why)"
	if got := tally.line(false); got != want || strings.Contains(got, "\n") {
		t.Errorf("line %q\nwant %q", got, want)
	}
}
