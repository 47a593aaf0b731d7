package llama

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/internal/fptol"
)

func testConfig() Config {
	return Config{Architecture: "LlamaForCausalLM", VocabSize: 97, Hidden: 48, Intermediate: 80, Layers: 2,
		Heads: 6, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
}

func randomModel(t *testing.T, c Config, seed uint64) *Model {
	t.Helper()
	m, err := Random(c, seed, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// storage is m's float32 storage of one weight.
func storage(t *testing.T, m *Model, p Part, blk int) []float32 {
	t.Helper()
	x, err := m.Storage(p, blk)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

type run struct {
	taps   map[[2]int][]float32 // (point, layer) -> rows
	logits []float32
}

func forward(t *testing.T, m *Model, seqs [][]int32, workers int) run {
	t.Helper()
	n, longest := 0, 0
	for _, s := range seqs {
		n += len(s)
		longest = max(longest, len(s))
	}
	ws, err := m.NewWorkspace(n, longest, workers)
	if err != nil {
		t.Fatal(err)
	}
	r := run{taps: map[[2]int][]float32{}, logits: make([]float32, n*m.Cfg.VocabSize)}
	tap := func(p Point, l int, x []float32) error {
		r.taps[[2]int{int(p), l}] = append([]float32(nil), x...)
		return nil
	}
	if err := m.Forward(context.Background(), ws, seqs, tap, r.logits); err != nil {
		t.Fatal(err)
	}
	return r
}

func maxRel(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / den
}

func ids(seed uint64, vocab, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

// The rotary embedding rotates the pair (x[i], x[i+hd/2]) by pos·theta^(-2i/hd), Hugging Face's
// rotate-half layout, checked on hand-computed values.
func TestRopeKnownAnswer(t *testing.T) {
	c := testConfig()
	c.HeadDim, c.RopeTheta = 4, 100
	m := &Model{Cfg: c}
	ws := &Workspace{}
	m.ensureRope(ws, 8)
	x := []float32{1, 2, 3, 4}
	const pos = 5
	rotate(x, ws.cos[pos*2:pos*2+2], ws.sin[pos*2:pos*2+2])
	// Frequencies 100^0 = 1 and 100^(-1/2) = 0.1.
	a0, a1 := 5.0, 0.5
	want := []float64{
		1*math.Cos(a0) - 3*math.Sin(a0), 2*math.Cos(a1) - 4*math.Sin(a1),
		3*math.Cos(a0) + 1*math.Sin(a0), 4*math.Cos(a1) + 2*math.Sin(a1),
	}
	for i := range x {
		if math.Abs(float64(x[i])-want[i]) > 1e-6 {
			t.Fatalf("rotate: got %v, want %v", x, want)
		}
	}
}

// Llama 3.1's scaling keeps high frequencies, divides low ones by the factor and interpolates the
// band between, checked against the rule's values for a small head.
func TestLlama3RopeScaling(t *testing.T) {
	c := testConfig()
	c.HeadDim, c.RopeTheta = 8, 10000
	c.Rope = RopeScaling{Kind: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 64}
	got := c.InvFreq()
	// Base frequencies 1, 0.1, 0.01, 0.001 have wavelengths 6.28, 62.8, 628, 6283; the band is
	// [64/4, 64/1] = [16, 64]: the first is kept, the last two divided by 8, the second smoothed.
	s := (64/(2*math.Pi/0.1) - 1) / (4 - 1)
	want := []float64{1, (1-s)*0.1/8 + s*0.1, 0.01 / 8, 0.001 / 8}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12*want[i] {
			t.Fatalf("inv freq %d: got %g, want %g", i, got[i], want[i])
		}
	}
}

// Changing a later token changes nothing before it: rows, taps and logits of earlier positions
// are bit-identical, and the changed position's rows do change.
func TestCausalMask(t *testing.T) {
	m := randomModel(t, testConfig(), 1)
	a := ids(3, m.Cfg.VocabSize, 12)
	b := append([]int32(nil), a...)
	b[7] = (b[7] + 1) % int32(m.Cfg.VocabSize)
	ra, rb := forward(t, m, [][]int32{a}, 2), forward(t, m, [][]int32{b}, 2)
	d := m.Cfg.Hidden
	for k, x := range ra.taps {
		y := rb.taps[k]
		for i := 0; i < 7*d; i++ {
			if x[i] != y[i] {
				t.Fatalf("tap %v: row %d changed when token 7 changed", k, i/d)
			}
		}
		if k[1] > 0 && maxRel(x[7*d:], y[7*d:]) < 1e-3 {
			t.Fatalf("tap %v: rows from 7 on did not change", k)
		}
	}
	v := m.Cfg.VocabSize
	for i := 0; i < 7*v; i++ {
		if ra.logits[i] != rb.logits[i] {
			t.Fatalf("logits of row %d changed", i/v)
		}
	}
}

// Grouped-query attention equals multi-head attention whose key and value heads are the grouped
// ones repeated for every query head of the group.
func TestGQAEqualsRepeatedMHA(t *testing.T) {
	c := testConfig()
	g := randomModel(t, c, 2)
	mc := c
	mc.KVHeads = c.Heads
	mh, err := New(mc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, hd, d := c.Heads/c.KVHeads, c.HeadDim, c.Hidden
	for _, tn := range c.Tensors(c.Layers) {
		src, dst := storage(t, g, tn.Part, tn.Block), storage(t, mh, tn.Part, tn.Block)
		if tn.Part != KProj && tn.Part != VProj {
			copy(dst, src)
			continue
		}
		for h := 0; h < c.Heads; h++ {
			kv := h / rep
			copy(dst[h*hd*d:(h+1)*hd*d], src[kv*hd*d:(kv+1)*hd*d])
		}
	}
	seq := [][]int32{ids(4, c.VocabSize, 20)}
	rg, rm := forward(t, g, seq, 2), forward(t, mh, seq, 2)
	// The two forwards compute the same formula with GEMMs of other shapes (k, v of 2 heads or
	// of 6), which a BLAS kernel may sum in another order: they agree within the bound of two
	// float32 evaluations of the chain (6 products a block: q/k/v, scores, values, o, gate/up,
	// down; the output head), not bit for bit. A wrong head mapping differs by O(1).
	tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, len(seq[0])), fptol.Float32)
	if e := maxRel(rg.logits, rm.logits); e > tol {
		t.Fatalf("GQA and repeated-head MHA logits differ by %g (bound %g)", e, tol)
	}
	if e := maxRel(rg.taps[[2]int{int(Residual), c.Layers}], rm.taps[[2]int{int(Residual), c.Layers}]); e > tol {
		t.Fatalf("final rows differ by %g (bound %g)", e, tol)
	}
}

// A tied model gives the logits of an untied one whose output projection is a copy of the
// embedding; an untied one with a different projection does not.
func TestTiedEmbeddings(t *testing.T) {
	c := testConfig()
	c.TiedEmbeddings = true
	tied := randomModel(t, c, 5)
	if &storage(t, tied, LMHead, -1)[0] != &storage(t, tied, Embedding, -1)[0] {
		t.Fatal("tied model's output projection is not its embedding")
	}
	uc := c
	uc.TiedEmbeddings = false
	untied, err := New(uc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range c.Tensors(c.Layers) {
		copy(storage(t, untied, tn.Part, tn.Block), storage(t, tied, tn.Part, tn.Block))
	}
	copy(storage(t, untied, LMHead, -1), storage(t, tied, Embedding, -1))
	seq := [][]int32{ids(6, c.VocabSize, 9)}
	a, b := forward(t, tied, seq, 1), forward(t, untied, seq, 1)
	if e := maxRel(a.logits, b.logits); e != 0 {
		t.Fatalf("tied vs untied copy: logits differ by %g", e)
	}
	storage(t, untied, LMHead, -1)[0] += 1
	if e := maxRel(forward(t, untied, seq, 1).logits, a.logits); e == 0 {
		t.Fatal("changing the untied projection changed no logit")
	}
}

// Packing texts into one batch gives each text the rows it has alone, on any worker count.
func TestPackedBatchEqualsAlone(t *testing.T) {
	c := testConfig()
	c.QKVBias, c.QKNorm = true, true
	m := randomModel(t, c, 7)
	seqs := [][]int32{ids(1, c.VocabSize, 5), ids(2, c.VocabSize, 1), ids(3, c.VocabSize, 30)}
	batch := forward(t, m, seqs, 3)
	off := 0
	for _, s := range seqs {
		alone := forward(t, m, [][]int32{s}, 1)
		for k, x := range alone.taps {
			y := batch.taps[k][off*c.Hidden : (off+len(s))*c.Hidden]
			if e := maxRel(y, x); e > 1e-5 {
				t.Fatalf("tap %v: batch vs alone differ by %g", k, e)
			}
		}
		off += len(s)
	}
}

// The incremental forward (KV cache; one token at a time, and in chunks) gives the rows and
// logits of the full forward pass, and a truncated cache branches from a shared prefix.
func TestIncrementalEqualsFull(t *testing.T) {
	c := testConfig()
	c.QKNorm = true
	c.Rope = RopeScaling{Kind: RopeLinear, Factor: 2}
	m := randomModel(t, c, 8)
	seq := ids(9, c.VocabSize, 24)
	full := forward(t, m, [][]int32{seq}, 2)
	d, v := c.Hidden, c.VocabSize
	for _, chunk := range []int{1, 5} {
		ws, err := m.NewWorkspace(8, 8, 2)
		if err != nil {
			t.Fatal(err)
		}
		cache, err := m.NewCache(len(seq))
		if err != nil {
			t.Fatal(err)
		}
		for lo := 0; lo < len(seq); lo += chunk {
			hi := min(lo+chunk, len(seq))
			lg := make([]float32, (hi-lo)*v)
			tap := func(p Point, l int, x []float32) error {
				want := full.taps[[2]int{int(p), l}][lo*d : hi*d]
				if e := maxRel(x, want); e > 1e-5 {
					t.Errorf("chunk %d, tokens %d..%d, %v layer %d: differ from full by %g", chunk, lo, hi, p, l, e)
				}
				return nil
			}
			if err := m.ForwardNext(context.Background(), ws, cache, seq[lo:hi], tap, lg); err != nil {
				t.Fatal(err)
			}
			if e := maxRel(lg, full.logits[lo*v:hi*v]); e > 1e-5 {
				t.Fatalf("chunk %d, tokens %d..%d: logits differ from full by %g", chunk, lo, hi, e)
			}
		}
		if cache.Len() != len(seq) {
			t.Fatalf("cache holds %d, want %d", cache.Len(), len(seq))
		}
	}
	// Branch: keep 10 tokens, feed a different 11th, compare with the full pass of that sequence.
	ws, _ := m.NewWorkspace(24, 24, 1)
	cache, _ := m.NewCache(24)
	if err := m.ForwardNext(context.Background(), ws, cache, seq, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := cache.Truncate(10); err != nil {
		t.Fatal(err)
	}
	alt := append(append([]int32(nil), seq[:10]...), (seq[10]+1)%int32(v))
	want := forward(t, m, [][]int32{alt}, 1).logits[10*v:]
	lg := make([]float32, v)
	if err := m.ForwardNext(context.Background(), ws, cache, alt[10:], nil, lg); err != nil {
		t.Fatal(err)
	}
	if e := maxRel(lg, want); e > 1e-5 {
		t.Fatalf("branched continuation differs from the full pass by %g", e)
	}
}

// Bad inputs are errors, not panics.
func TestForwardRefusesBadInput(t *testing.T) {
	m := randomModel(t, testConfig(), 1)
	ws, err := m.NewWorkspace(16, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, seqs := range map[string][][]int32{
		"empty":    {{}},
		"too long": {make([]int32, 9)},
		"id":       {{1, int32(m.Cfg.VocabSize)}},
		"negative": {{-1}},
		"budget":   {make([]int32, 8), make([]int32, 8), {1}},
	} {
		if err := m.Forward(ctx, ws, seqs, nil, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := m.Forward(ctx, ws, [][]int32{{1, 2}}, nil, make([]float32, 3)); err == nil {
		t.Error("short logits: no error")
	}
	if _, err := m.NewWorkspace(16, 65, 1); err == nil {
		t.Error("workspace longer than max_position_embeddings: no error")
	}
	cache, _ := m.NewCache(4)
	if err := m.ForwardNext(ctx, ws, cache, []int32{1, 2, 3, 4, 5}, nil, nil); err == nil {
		t.Error("cache overflow: no error")
	}
	other := randomModel(t, testConfig(), 2)
	if err := other.Forward(ctx, ws, [][]int32{{1}}, nil, nil); err == nil {
		t.Error("another model's workspace: no error")
	}
	if err := other.ForwardNext(ctx, ws, cache, []int32{1}, nil, nil); err == nil {
		t.Error("another model's cache: no error")
	}
	bad := testConfig()
	bad.Heads = 5
	if _, err := New(bad, nil); err == nil {
		t.Error("heads not a multiple of kv heads: no error")
	}
	bad = testConfig()
	bad.Rope.Kind = "yarn"
	if _, err := New(bad, nil); err == nil {
		t.Error("yarn rope scaling: no error")
	}
}

// Random is a function of its seed.
func TestRandomDeterministic(t *testing.T) {
	a, b := randomModel(t, testConfig(), 3), randomModel(t, testConfig(), 3)
	c := randomModel(t, testConfig(), 4)
	if maxRel(storage(t, a, DownProj, 1), storage(t, b, DownProj, 1)) != 0 || maxRel(storage(t, a, LMHead, -1), storage(t, b, LMHead, -1)) != 0 {
		t.Fatal("same seed, different weights")
	}
	if maxRel(storage(t, a, DownProj, 1), storage(t, c, DownProj, 1)) == 0 {
		t.Fatal("different seeds, same weights")
	}
}

// ForwardAlternatives gives each candidate the rows ForwardNext gives it alone after the same
// prefix, at every layer and point, and leaves the cache as it was.
func TestForwardAlternativesMatchesForwardNext(t *testing.T) {
	c := testConfig()
	m := randomModel(t, c, 11)
	ws, err := m.NewWorkspace(16, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(16)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.ForwardNext(ctx, ws, cache, []int32{1, 40, 7, 7}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cands := []int32{3, 7, 96, 0, 40}
	d := c.Hidden
	got := map[[2]int][]float32{}
	err = m.ForwardAlternatives(ctx, ws, cache, cands, func(p Point, layer int, x []float32) error {
		got[[2]int{int(p), layer}] = append([]float32(nil), x[:len(cands)*d]...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 4 {
		t.Fatalf("cache length %d after ForwardAlternatives, want 4", cache.Len())
	}
	for j, id := range cands {
		one := cache.Clone()
		err := m.ForwardNext(ctx, ws, one, []int32{id}, func(p Point, layer int, x []float32) error {
			g := got[[2]int{int(p), layer}][j*d : (j+1)*d]
			for i := range g {
				if diff := math.Abs(float64(g[i] - x[i])); diff > 1e-5*(1+math.Abs(float64(x[i]))) {
					return fmt.Errorf("candidate %d, %s layer %d [%d]: %v, alone %v", id, p, layer, i, g[i], x[i])
				}
			}
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
}
