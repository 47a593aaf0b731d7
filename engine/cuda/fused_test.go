package cuda

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// kernelNameRE finds the fused-kernel names the engine's op files declare
// (const KernelInfoNCE = "infonce").
var kernelNameRE = regexp.MustCompile(`(?m)^const Kernel\w+ = "(\w+)"`)

// TestFusedKernelTable checks, without a GPU, that the CUDA backend
// registers exactly the fused kernels the engine's ops declare, each with
// the type the CPU backend registers under the same name: a kernel the
// CUDA table lacks or types differently would fail only on a GPU, at the
// op's first use.
func TestFusedKernelTable(t *testing.T) {
	files, err := filepath.Glob("../op_*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no engine op files: %v", err)
	}
	var declared []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kernelNameRE.FindAllStringSubmatch(string(src), -1) {
			declared = append(declared, m[1])
		}
	}
	table := (&Backend{}).kernelTable() // method values only: no device needed
	var registered []string
	for name := range table {
		registered = append(registered, name)
	}
	slices.Sort(declared)
	slices.Sort(registered)
	if !slices.Equal(declared, registered) {
		t.Fatalf("CUDA kernels %v, engine ops declare %v", registered, declared)
	}
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, k := range table {
		if got, want := reflect.TypeOf(k), reflect.TypeOf(c.Kernel(name)); got != want {
			t.Errorf("kernel %q: CUDA registers %v, CPU %v", name, got, want)
		}
	}
}

// TestOptionalKernels checks, without a GPU, the load-time rule for lm.cu's
// kernels: each language-model op is registered exactly when the embedded
// PTX holds all of its entry points (an lm.ptx built before an op's kernel
// was added lacks that op's and registers the others), and a module with
// only some of an op's entry points is refused.
func TestOptionalKernels(t *testing.T) {
	table := (&Backend{}).kernelTable()
	for name := range optionalKernels {
		if _, ok := table[name]; !ok {
			t.Errorf("optional kernel %q is not in kernelTable", name)
		}
	}
	lm, err := os.ReadFile("kernels/lm.cu")
	if err != nil {
		t.Fatal(err)
	}
	optionalEntry := map[string]bool{}
	for name, entries := range optionalKernels {
		for _, e := range entries {
			optionalEntry[e] = true
			if !strings.Contains(string(lm), " "+e+"(") {
				t.Errorf("optional kernel %q: entry point %s not in kernels/lm.cu", name, e)
			}
		}
	}

	// What NewBackend registers for the embedded PTX.
	loaded := map[string]bool{}
	ptx := embeddedPTX()
	for _, src := range ptx {
		for _, e := range PTXEntries(src) {
			loaded[e] = true
		}
	}
	got, err := usableKernels(table, func(e string) bool { return loaded[e] })
	if err != nil {
		t.Fatalf("embedded PTX: %v", err)
	}
	var missing []string
	for name, entries := range optionalKernels {
		all := true
		for _, e := range entries {
			all = all && loaded[e]
		}
		if _, ok := got[name]; ok != all {
			t.Errorf("embedded PTX: kernel %q registered %v, its entry points %v loaded %v", name, ok, entries, all)
		}
		if !all {
			missing = append(missing, name)
		}
	}
	if len(got) != len(table)-len(missing) {
		t.Errorf("%d kernels registered of %d, %d optional ones missing", len(got), len(table), len(missing))
	}
	slices.Sort(missing)
	_, haveLM := ptx[lmModule]
	t.Logf("embedded PTX: %d modules, %s present: %v; %d of %d fused kernels registered; missing %v", len(ptx), lmModule, haveLM, len(got), len(table), missing)

	all := func(string) bool { return true }
	if got, err := usableKernels(table, all); err != nil || len(got) != len(table) {
		t.Errorf("every entry point loaded: %d of %d kernels, err %v", len(got), len(table), err)
	}
	none := func(e string) bool { return !optionalEntry[e] }
	if got, err := usableKernels(table, none); err != nil || len(got) != len(table)-len(optionalKernels) {
		t.Errorf("no lm.cu entry point loaded: %d of %d kernels, err %v", len(got), len(table), err)
	}
	stale := func(e string) bool { return e != "ga_span_attention" } // lm.ptx from before SpanAttention
	if got, err := usableKernels(table, stale); err != nil || len(got) != len(table)-1 || got[engine.KernelSpanAttention] != nil {
		t.Errorf("lm.ptx without ga_span_attention: %d of %d kernels (span_attention registered: %v), err %v",
			len(got), len(table), got[engine.KernelSpanAttention] != nil, err)
	}
	partial := func(e string) bool { return e != "ga_xent_bwd" }
	if _, err := usableKernels(table, partial); err == nil || !strings.Contains(err.Error(), "ga_xent_bwd") {
		t.Errorf("ga_xent_bwd alone missing: err %v, want one naming it", err)
	}
}
