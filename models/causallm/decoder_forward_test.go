package causallm_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// smallConfig is a grouped-query decoder small enough for exhaustive checks.
func smallConfig() llama.Config {
	return llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 97, Hidden: 48, Intermediate: 80, Layers: 2,
		Heads: 6, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
}

func randomWeights(t *testing.T, c llama.Config, seed uint64) *llama.Model {
	t.Helper()
	w, err := llama.Random(c, seed, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func decoder(t *testing.T, w *llama.Model, workers int) *causallm.Decoder {
	t.Helper()
	dc, err := causallm.NewDecoder(newCPU(t, workers), w)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// pass is one forward pass's taps and logits.
type pass struct {
	taps   taps
	logits []float32
}

func forward(t *testing.T, dc *causallm.Decoder, seqs [][]int32) pass {
	t.Helper()
	n := 0
	for _, s := range seqs {
		n += len(s)
	}
	p := pass{taps: taps{}, logits: make([]float32, n*dc.Config().VocabSize)}
	if err := dc.Forward(context.Background(), seqs, p.taps.tap, p.logits); err != nil {
		t.Fatal(err)
	}
	return p
}

func weight(t *testing.T, w *llama.Model, p llama.Part, blk int) []float32 {
	t.Helper()
	x, err := w.Storage(p, blk)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Changing a later token changes nothing before it: rows, taps and logits of earlier positions
// are bit-identical, and the changed position's rows do change.
func TestCausalMask(t *testing.T) {
	w := randomWeights(t, smallConfig(), 1)
	dc := decoder(t, w, 2)
	c := w.Cfg
	a := tokens(3, c.VocabSize, 12)
	b := slices.Clone(a)
	b[7] = (b[7] + 1) % int32(c.VocabSize)
	ra, rb := forward(t, dc, [][]int32{a}), forward(t, dc, [][]int32{b})
	d := c.Hidden
	for k, x := range ra.taps {
		y := rb.taps[k]
		for i := 0; i < 7*d; i++ {
			if x[i] != y[i] {
				t.Fatalf("tap %v: row %d changed when token 7 changed", k, i/d)
			}
		}
		if maxRel(x[7*d:], y[7*d:]) < 1e-3 {
			t.Fatalf("tap %v: rows from 7 on did not change", k)
		}
	}
	v := c.VocabSize
	for i := 0; i < 7*v; i++ {
		if ra.logits[i] != rb.logits[i] {
			t.Fatalf("logits of row %d changed", i/v)
		}
	}
}

// Grouped-query attention equals multi-head attention whose key and value heads are the grouped
// ones repeated for every query head of the group, within the bound of two float32 evaluations
// (the projections are GEMMs of other shapes). A wrong head mapping differs by O(1).
func TestGQAEqualsRepeatedMHA(t *testing.T) {
	c := smallConfig()
	g := randomWeights(t, c, 2)
	mc := c
	mc.KVHeads = c.Heads
	mh, err := llama.New(mc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, hd, d := c.Heads/c.KVHeads, c.HeadDim, c.Hidden
	for _, tn := range c.Tensors(c.Layers) {
		src, dst := weight(t, g, tn.Part, tn.Block), weight(t, mh, tn.Part, tn.Block)
		if tn.Part != llama.KProj && tn.Part != llama.VProj {
			copy(dst, src)
			continue
		}
		for h := 0; h < c.Heads; h++ {
			kv := h / rep
			copy(dst[h*hd*d:(h+1)*hd*d], src[kv*hd*d:(kv+1)*hd*d])
		}
	}
	seq := [][]int32{tokens(4, c.VocabSize, 20)}
	rg, rm := forward(t, decoder(t, g, 2), seq), forward(t, decoder(t, mh, 2), seq)
	tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, len(seq[0])), fptol.Float32)
	if e := maxRel(rg.logits, rm.logits); e > tol {
		t.Fatalf("GQA and repeated-head MHA logits differ by %g (bound %g)", e, tol)
	}
	k := [2]int{int(llama.Residual), c.Layers}
	if e := maxRel(rg.taps[k], rm.taps[k]); e > tol {
		t.Fatalf("final rows differ by %g (bound %g)", e, tol)
	}
}

// A tied model gives the logits of an untied one whose output projection is a copy of the
// embedding; an untied one with a different projection does not.
func TestTiedEmbeddings(t *testing.T) {
	c := smallConfig()
	c.TiedEmbeddings = true
	tied := randomWeights(t, c, 5)
	uc := c
	uc.TiedEmbeddings = false
	untied, err := llama.New(uc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range c.Tensors(c.Layers) {
		copy(weight(t, untied, tn.Part, tn.Block), weight(t, tied, tn.Part, tn.Block))
	}
	copy(weight(t, untied, llama.LMHead, -1), weight(t, tied, llama.Embedding, -1))
	seq := [][]int32{tokens(6, c.VocabSize, 9)}
	a, b := forward(t, decoder(t, tied, 1), seq), forward(t, decoder(t, untied, 1), seq)
	if e := maxRel(a.logits, b.logits); e != 0 {
		t.Fatalf("tied vs untied copy: logits differ by %g", e)
	}
	weight(t, untied, llama.LMHead, -1)[0] += 1
	if e := maxRel(forward(t, decoder(t, untied, 1), seq).logits, a.logits); e == 0 {
		t.Fatal("changing the untied projection changed no logit")
	}
}

// Packing texts into one batch gives each text the rows it has alone, bit for bit: every op is
// row-wise but the GEMMs, whose tiles do not depend on the other rows' values.
func TestPackedBatchEqualsAlone(t *testing.T) {
	c := smallConfig()
	c.QKVBias, c.QKNorm = true, true
	dc := decoder(t, randomWeights(t, c, 7), 3)
	seqs := [][]int32{tokens(1, c.VocabSize, 5), tokens(2, c.VocabSize, 1), tokens(3, c.VocabSize, 30)}
	batch := forward(t, dc, seqs)
	off := 0
	tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, 30), fptol.Float32)
	for _, s := range seqs {
		alone := forward(t, dc, [][]int32{s})
		for k, x := range alone.taps {
			y := batch.taps[k][off*c.Hidden : (off+len(s))*c.Hidden]
			if e := maxRel(y, x); e > tol {
				t.Fatalf("tap %v: batch vs alone differ by %g (bound %g)", k, e, tol)
			}
		}
		off += len(s)
	}
}

// A truncated cache branches from a shared prefix: keep 10 tokens, feed a different 11th, and the
// logits are the full pass's of that sequence; with a linear rope scaling and q/k norms.
func TestTruncatedCacheBranches(t *testing.T) {
	c := smallConfig()
	c.QKNorm = true
	c.Rope = llama.RopeScaling{Kind: llama.RopeLinear, Factor: 2}
	dc := decoder(t, randomWeights(t, c, 8), 2)
	seq := tokens(9, c.VocabSize, 24)
	v := c.VocabSize
	cache, err := dc.NewCache(24)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := dc.ForwardNext(ctx, cache, seq, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := cache.Truncate(10); err != nil {
		t.Fatal(err)
	}
	alt := append(slices.Clone(seq[:10]), (seq[10]+1)%int32(v))
	want := forward(t, dc, [][]int32{alt}).logits[10*v:]
	lg := make([]float32, v)
	if err := dc.ForwardNext(ctx, cache, alt[10:], nil, lg); err != nil {
		t.Fatal(err)
	}
	tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, 24), fptol.Float32)
	if e := maxRel(lg, want); e > tol {
		t.Fatalf("branched continuation differs from the full pass by %g (bound %g)", e, tol)
	}
	if err := cache.Truncate(12); err == nil {
		t.Fatal("truncating a cache of 11 tokens to 12: no error")
	}
}

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

// The decoder gives the same bits on CPU backends of 1, 2, 3 and 5 workers (GOMAXPROCS set to
// match): every GEMM's split is a function of its shape, not of the workers. The shapes take
// both splits (a packed batch of 197 rows against outputs of 128 to 1200; one of 40 rows), F32
// weights computed in place and BF16 ones converted per pass, and the KV-cache and alternatives
// passes that decode's search makes.
func TestWorkerCountInvariant(t *testing.T) {
	c := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 300, Hidden: 128, Intermediate: 600, Layers: 2,
		Heads: 4, KVHeads: 2, HeadDim: 32, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 256}
	prevProcs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prevProcs)
	for _, lib := range libraries(t) {
		m, err := llama.Random(c, 31, 0.05, lib)
		if err != nil {
			t.Fatal(err)
		}
		bf16, _ := storedBF16(t, m, c.Layers)
		for wi, model := range []*llama.Model{m, bf16} {
			var want map[string][]float32
			for _, workers := range []int{1, 2, 3, 5} {
				runtime.GOMAXPROCS(workers)
				be, err := cpu.New(cpu.Config{Workers: workers, BLAS: lib})
				if err != nil {
					t.Fatal(err)
				}
				dc, err := causallm.NewDecoder(be, model)
				if err != nil {
					t.Fatal(err)
				}
				got := workerPasses(t, dc)
				be.Close()
				if want == nil {
					want = got
					continue
				}
				for k, w := range want {
					if !slices.EqualFunc(got[k], w, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Errorf("%s, %s weights: %s on %d workers differs from 1 worker", lib.Name(), []string{"F32", "BF16"}[wi], k, workers)
					}
				}
			}
		}
	}
}

// workerPasses runs dc through packed batches (Forward with logits), a prefix fed through a KV
// cache in two steps and 100 alternatives after it, and returns every tap and logit.
func workerPasses(t *testing.T, dc *causallm.Decoder) map[string][]float32 {
	t.Helper()
	c := dc.Config()
	ctx := context.Background()
	out := map[string][]float32{}
	record := func(pass string) llama.Tap {
		return func(p llama.Point, l int, x []float32) error {
			out[fmt.Sprintf("%s/%s/%d", pass, p, l)] = slices.Clone(x)
			return nil
		}
	}
	for b, seqs := range [][][]int32{{tokens(1, c.VocabSize, 90), tokens(2, c.VocabSize, 70), tokens(3, c.VocabSize, 37)}, {tokens(4, c.VocabSize, 40)}} {
		n := 0
		for _, s := range seqs {
			n += len(s)
		}
		lg := make([]float32, n*c.VocabSize)
		pass := fmt.Sprintf("forward %d", b)
		if err := dc.Forward(ctx, seqs, record(pass), lg); err != nil {
			t.Fatal(err)
		}
		out[pass+"/logits"] = lg
	}
	cache, err := dc.NewCache(64)
	if err != nil {
		t.Fatal(err)
	}
	prefix := tokens(5, c.VocabSize, 30)
	for i, part := range [][]int32{prefix[:20], prefix[20:]} {
		if err := dc.ForwardNext(ctx, cache, part, record(fmt.Sprintf("next %d", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	alts := make([]int32, 100)
	for i := range alts {
		alts[i] = int32(3 * i)
	}
	if err := dc.ForwardAlternatives(ctx, cache, alts, record("alternatives")); err != nil {
		t.Fatal(err)
	}
	return out
}

// ForwardAlternativesOf runs the alternatives of several prefixes (of different lengths, one of
// them taken twice) in one batch: each row agrees with ForwardAlternatives of its own prefix
// within the fp32 chain bound at every tap, the caches are left as they were, and a single prefix
// gives ForwardAlternatives' bits (the same GEMM shapes).
func TestForwardAlternativesOfSeveralPrefixes(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			dc := decoder(t, randomWeights(t, c, 5), 2)
			ctx := context.Background()
			var caches []*causallm.Cache
			for i, n := range []int{3, 7, 1} {
				cache, err := dc.NewCache(12)
				if err != nil {
					t.Fatal(err)
				}
				if err := dc.ForwardNext(ctx, cache, tokens(uint64(30+i), c.VocabSize, n), nil, nil); err != nil {
					t.Fatal(err)
				}
				caches = append(caches, cache)
			}
			caches = append(caches, caches[1])
			ids := [][]int32{tokens(40, c.VocabSize, 4), tokens(41, c.VocabSize, 2), tokens(42, c.VocabSize, 5), tokens(43, c.VocabSize, 3)}
			got := taps{}
			if err := dc.ForwardAlternativesOf(ctx, caches, ids, got.tap); err != nil {
				t.Fatal(err)
			}
			tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, 12), fptol.Float32)
			row := 0
			for i, cache := range caches {
				if cache.Len() != []int{3, 7, 1, 7}[i] {
					t.Fatalf("prefix %d: cache holds %d tokens after the alternatives", i, cache.Len())
				}
				want := taps{}
				if err := dc.ForwardAlternatives(ctx, cache, ids[i], want.tap); err != nil {
					t.Fatal(err)
				}
				d, n := c.Hidden, len(ids[i])
				for k, x := range want {
					if e := maxRel(got[k][row*d:(row+n)*d], x); e > tol {
						t.Errorf("prefix %d, %v: rows differ from its own alternatives by %g (bound %g)", i, k, e, tol)
					}
				}
				row += n
			}
			one, alone := taps{}, taps{}
			if err := dc.ForwardAlternativesOf(ctx, caches[1:2], ids[1:2], one.tap); err != nil {
				t.Fatal(err)
			}
			if err := dc.ForwardAlternatives(ctx, caches[1], ids[1], alone.tap); err != nil {
				t.Fatal(err)
			}
			for k, x := range alone {
				if maxRel(one[k], x) != 0 {
					t.Errorf("one prefix, %v: differs from ForwardAlternatives", k)
				}
			}
			if err := dc.ForwardAlternativesOf(ctx, caches[:2], ids[:1], nil); err == nil {
				t.Error("2 caches for 1 list of tokens: no error")
			}
		})
	}
}
