package cuda

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/cpu"
)

// kernelNameRE finds the fused-kernel names the engine's op files declare
// (const KernelInfoNCE = "infonce").
var kernelNameRE = regexp.MustCompile(`(?m)^const Kernel\w+ = "(\w+)"`)

// cpuOnlyRoPEAttention are fused kernels that only the CPU backend has so
// far (issue 27's language model; no CUDA C written for them yet): on a GPU
// the ops fail the tape naming the kernel. A CUDA kernel added for one of
// them must also leave this list, or the test fails.
var cpuOnlyRoPEAttention = []string{
	"rope",             // engine.KernelRoPE
	"causal_attention", // engine.KernelCausalAttention
}

// cpuOnlyEmbeddingXent are the language model's embedding lookup and chunked
// vocabulary cross-entropy, CPU only so far in the same way.
var cpuOnlyEmbeddingXent = []string{
	"embedding", // engine.KernelEmbedding
	"xent",      // engine.KernelCrossEntropy
}

// cpuOnlyKernels is every declared kernel the CUDA table may lack.
func cpuOnlyKernels() []string {
	return slices.Concat(cpuOnlyRoPEAttention, cpuOnlyEmbeddingXent)
}

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
	cpuOnly := cpuOnlyKernels()
	var cpuOnlyDeclared []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kernelNameRE.FindAllStringSubmatch(string(src), -1) {
			if slices.Contains(cpuOnly, m[1]) {
				cpuOnlyDeclared = append(cpuOnlyDeclared, m[1])
				continue
			}
			declared = append(declared, m[1])
		}
	}
	slices.Sort(cpuOnly)
	slices.Sort(cpuOnlyDeclared)
	if !slices.Equal(cpuOnly, cpuOnlyDeclared) {
		t.Fatalf("CPU-only kernels %v, but the engine ops declare only %v of them", cpuOnly, cpuOnlyDeclared)
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
