package llama

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
)

// libraries is every GEMM library this machine can run: gonum always, OpenBLAS when it loads.
func libraries(t *testing.T) []*blas.Library {
	t.Helper()
	libs := []*blas.Library{blas.Gonum()}
	if ob, err := blas.OpenOpenBLAS(); err == nil {
		libs = append(libs, ob)
	} else {
		t.Logf("OpenBLAS not loaded (%v): gonum only", err)
	}
	return libs
}

// The forward passes give the same bits on 1, 2, 3 and 5 workers (GOMAXPROCS set to match), with
// single-threaded BLAS calls as callers run them: every GEMM's tiles are a function of its shape,
// not of the workers. (OpenBLAS threading a call changes its bits with the thread count under
// OPENBLAS_CORETYPE=Haswell, which is why the workers are the only parallelism.) The shapes take both splits (a packed batch of 197
// rows against outputs of 128 to 1200, the gate/up projection cut in two column tiles; one of 40 rows), F32 and BF16 weights (converted per tile),
// and the KV-cache and alternatives passes that decode's search makes.
func TestWorkerCountInvariant(t *testing.T) {
	c := Config{Architecture: "LlamaForCausalLM", VocabSize: 300, Hidden: 128, Intermediate: 600, Layers: 2,
		Heads: 4, KVHeads: 2, HeadDim: 32, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 256}
	prevProcs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prevProcs)
	for _, lib := range libraries(t) {
		prevThreads := lib.Threads()
		m, err := Random(c, 31, 0.05, lib)
		if err != nil {
			t.Fatal(err)
		}
		bf16, _, _ := storedCopy(t, m, BF16, backToBack, c.Layers)
		for wi, model := range []*Model{m, bf16} {
			var want map[string][]float32
			for _, workers := range []int{1, 2, 3, 5} {
				runtime.GOMAXPROCS(workers)
				lib.SetThreads(1)
				got := workerPasses(t, model, workers)
				if want == nil {
					want = got
					continue
				}
				for k, w := range want {
					if !slices.EqualFunc(got[k], w, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Errorf("%s, %s weights: %s on %d workers differs from 1 worker", lib.Name(), []DType{F32, BF16}[wi], k, workers)
					}
				}
			}
		}
		lib.SetThreads(prevThreads)
	}
}

// workerPasses runs m on workers through a packed batch (Forward with logits), a prefix fed
// through a KV cache in two steps and 100 alternatives after it, and returns every tap and logit.
func workerPasses(t *testing.T, m *Model, workers int) map[string][]float32 {
	t.Helper()
	c := m.Cfg
	ctx := context.Background()
	out := map[string][]float32{}
	record := func(pass string) Tap {
		return func(p Point, l int, x []float32) error {
			out[fmt.Sprintf("%s/%s/%d", pass, p, l)] = slices.Clone(x)
			return nil
		}
	}
	for b, seqs := range [][][]int32{{ids(1, c.VocabSize, 90), ids(2, c.VocabSize, 70), ids(3, c.VocabSize, 37)}, {ids(4, c.VocabSize, 40)}} {
		n, longest := 0, 0
		for _, s := range seqs {
			n, longest = n+len(s), max(longest, len(s))
		}
		ws, err := m.NewWorkspace(n, longest, workers)
		if err != nil {
			t.Fatal(err)
		}
		lg := make([]float32, n*c.VocabSize)
		pass := fmt.Sprintf("forward %d", b)
		if err := m.Forward(ctx, ws, seqs, record(pass), lg); err != nil {
			t.Fatal(err)
		}
		out[pass+"/logits"] = lg
	}
	ws, err := m.NewWorkspace(128, 64, workers)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(64)
	if err != nil {
		t.Fatal(err)
	}
	prefix := ids(5, c.VocabSize, 30)
	for i, part := range [][]int32{prefix[:20], prefix[20:]} {
		if err := m.ForwardNext(ctx, ws, cache, part, record(fmt.Sprintf("next %d", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	alts := make([]int32, 100)
	for i := range alts {
		alts[i] = int32(3 * i)
	}
	if err := m.ForwardAlternatives(ctx, ws, cache, alts, record("alternatives")); err != nil {
		t.Fatal(err)
	}
	return out
}
