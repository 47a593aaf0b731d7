package causallm_test

// The Decoder on the GPU: the same passes as on the CPU (within the bound of two fp32
// evaluations), and its speed at a Llama-2-7B shape. Both skip without a GPU; scripts/gpu-bundle.sh
// runs them (models/causallm:CUDA) with GELOATTACK_CUDA_PTX at a freshly built lm.ptx.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// agreement is how a decoder on one backend compares with the same weights on the CPU: the worst
// relative error of each output (max |dut - ref| over max |ref|) and every disagreement found.
type agreement struct {
	tol   float64
	worst map[string]float64
	bad   []string
}

// passes runs the decoder through every kind of pass the attacks make and returns each output by
// name: a packed Forward of two texts with every tap and the logits; ForwardNext of a 5-token
// prefix into a cache, of one more token on a clone, of a 4-token chunk on the cache (taps and
// logits each); ForwardAlternatives of four candidates (one twice) after the clone's 6 tokens;
// ForwardAlternativesOf the clone's four and the 9-token cache's first two; and the packed
// Forward again.
func passes(dc *causallm.Decoder, seq, other []int32) (map[string][]float32, error) {
	c := dc.Config()
	ctx := context.Background()
	out := map[string][]float32{}
	tapInto := func(pass string) llama.Tap {
		return func(p llama.Point, l int, x []float32) error {
			out[fmt.Sprintf("%s %s %d", pass, p, l)] = slices.Clone(x)
			return nil
		}
	}
	logits := func(pass string, rows int) []float32 {
		out[pass+" logits"] = make([]float32, rows*c.VocabSize)
		return out[pass+" logits"]
	}
	if err := dc.Forward(ctx, [][]int32{seq, other}, tapInto("forward"), logits("forward", len(seq)+len(other))); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	cache, err := dc.NewCache(len(seq))
	if err != nil {
		return nil, err
	}
	if err := dc.ForwardNext(ctx, cache, seq[:5], tapInto("next-prefix"), logits("next-prefix", 5)); err != nil {
		return nil, fmt.Errorf("forward next: %w", err)
	}
	clone, err := dc.Clone(cache)
	if err != nil {
		return nil, err
	}
	if err := dc.ForwardNext(ctx, clone, seq[5:6], tapInto("next-one"), logits("next-one", 1)); err != nil {
		return nil, fmt.Errorf("forward next on a clone: %w", err)
	}
	if err := dc.ForwardNext(ctx, cache, seq[5:9], tapInto("next-chunk"), logits("next-chunk", 4)); err != nil {
		return nil, fmt.Errorf("forward next, a chunk: %w", err)
	}
	alts := []int32{seq[6], (seq[6] + 1) % int32(c.VocabSize), seq[6], 3}
	if err := dc.ForwardAlternatives(ctx, clone, alts, tapInto("alternatives")); err != nil {
		return nil, fmt.Errorf("forward alternatives: %w", err)
	}
	if err := dc.ForwardAlternativesOf(ctx, []*causallm.Cache{clone, cache}, [][]int32{alts, alts[:2]}, tapInto("alternatives-of")); err != nil {
		return nil, fmt.Errorf("forward alternatives of two prefixes: %w", err)
	}
	if err := dc.Forward(ctx, [][]int32{seq, other}, tapInto("forward-again"), logits("forward-again", len(seq)+len(other))); err != nil {
		return nil, fmt.Errorf("forward again: %w", err)
	}
	return out, nil
}

// decoderAgreement compares w's decoder on dut with it on ref (the CPU), output by output, within
// the bound of two fp32 evaluations of the model's chain of products (fptol.Chain: 6 products a
// block, the final norm and the logits; inner dimensions up to the MLP's width), and checks the
// bits that must be equal on dut itself: the same candidate twice among the alternatives, and a
// pass repeated. It also checks that the bound can tell two candidates apart, or it proves nothing.
func decoderAgreement(ref, dut engine.Backend, w *llama.Model) (*agreement, error) {
	c := w.Cfg
	a := &agreement{tol: fptol.Chain(6*c.Layers+2, max(c.Hidden, c.Intermediate, 16), fptol.Float32), worst: map[string]float64{}}
	seq, other := tokens(4, c.VocabSize, 12), tokens(5, c.VocabSize, 6)
	var outs [2]map[string][]float32
	for i, be := range []engine.Backend{ref, dut} {
		dc, err := causallm.NewDecoder(be, w)
		if err != nil {
			return nil, err
		}
		if outs[i], err = passes(dc, seq, other); err != nil {
			return nil, fmt.Errorf("on %s: %w", be.Name(), err)
		}
	}
	want, got := outs[0], outs[1]
	for k, x := range want {
		y := got[k]
		if len(y) != len(x) {
			a.bad = append(a.bad, fmt.Sprintf("%s: %d values, the CPU's %d", k, len(y), len(x)))
			continue
		}
		e := maxRel(y, x)
		a.worst[k] = e
		if e > a.tol || math.IsNaN(e) {
			a.bad = append(a.bad, fmt.Sprintf("%s: relative error %.3g, bound %.3g", k, e, a.tol))
		}
	}
	d := c.Hidden
	for l := 0; l < c.Layers; l++ {
		x := got[fmt.Sprintf("alternatives %s %d", llama.AttnInput, l)]
		if e := maxRel(x[2*d:3*d], x[:d]); e != 0 {
			a.bad = append(a.bad, fmt.Sprintf("alternatives, block %d: the same candidate twice gives rows %.3g apart", l, e))
		}
		if e := maxRel(x[d:2*d], x[:d]); !(e > 10*a.tol) {
			a.bad = append(a.bad, fmt.Sprintf("alternatives, block %d: two candidates' rows only %.3g apart, within 10x the bound %.3g", l, e, a.tol))
		}
	}
	for k, x := range got {
		rest, first := strings.CutPrefix(k, "forward ")
		if again := got["forward-again "+rest]; first && maxRel(again, x) != 0 {
			a.bad = append(a.bad, fmt.Sprintf("%s: a repeated pass differs (%.3g)", k, maxRel(again, x)))
		}
	}
	sort.Strings(a.bad)
	return a, nil
}

// The worst error of each kind of pass, for the log.
func (a *agreement) summary() string {
	kinds := map[string]float64{}
	for k, e := range a.worst {
		kind, _, _ := strings.Cut(k, " ")
		kinds[kind] = math.Max(kinds[kind], e)
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	s := ""
	for _, k := range names {
		s += fmt.Sprintf("%s %.2g, ", k, kinds[k])
	}
	return s + fmt.Sprintf("bound %.2g", a.tol)
}

// cacheBlind is a backend whose SpanAttention ignores the KV cache: a kernel bug the agreement must
// catch.
type cacheBlind struct{ engine.Backend }

func (c cacheBlind) Unwrap() engine.Backend { return c.Backend }

func (c cacheBlind) Kernel(name string) any {
	k := c.Backend.Kernel(name)
	if f, ok := k.(engine.SpanAttentionKernel); ok {
		return engine.SpanAttentionKernel(func(o, q, kk, v, _, _, spans *engine.Tensor, heads, kvHeads int) {
			h := spans.ToHost() // (N, 3): every row's cache segment emptied
			for r := 0; r < len(h); r += 3 {
				h[r+1], h[r+2] = 0, 0
			}
			f(o, q, kk, v, nil, nil, engine.NewTape(c.Backend).Input(h, spans.Dim(0), 3), heads, kvHeads)
		})
	}
	return k
}

// The agreement itself, on the CPU: a device-like CPU backend (weights uploaded, as on a GPU)
// agrees with the CPU on every family, and a SpanAttention that ignores the cache is caught in
// every cached pass and in no pass without a cache.
func TestDecoderAgreementCatchesWhatItMust(t *testing.T) {
	ref := newCPU(t, 2)
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			w, err := llama.Random(c, 21, 0.2, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := decoderAgreement(ref, deviceLike{newCPU(t, 1)}, w)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range a.bad {
				t.Errorf("device-like CPU: %s", b)
			}
			blind, err := decoderAgreement(ref, cacheBlind{newCPU(t, 1)}, w)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("cache-blind SpanAttention against the CPU: %s", blind.summary())
			caught := map[string]bool{}
			for _, b := range blind.bad {
				pass, _, _ := strings.Cut(b, " ")
				caught[pass+" "] = true
			}
			for _, pass := range []string{"next-one ", "next-chunk ", "alternatives "} {
				if !caught[pass] {
					t.Errorf("a cache-blind SpanAttention passes %s(disagreements: %q)", pass, blind.bad)
				}
			}
			for _, pass := range []string{"forward ", "forward-again ", "next-prefix "} {
				if caught[pass] {
					t.Errorf("a cache-blind SpanAttention fails %s, which reads no cache: %q", pass, blind.bad)
				}
			}
		})
	}
}

// TestCUDADecoderMatchesCPU: the Decoder on the GPU (weights uploaded as float32, fp32 GEMMs,
// lm.cu's RoPE and SpanAttention) gives the CPU's taps, logits, cached passes and alternatives on
// the four families within the bound of two fp32 evaluations, the same bits for the same candidate
// twice and for a repeated pass.
func TestCUDADecoderMatchesCPU(t *testing.T) {
	gpu := cudatest.Open(t, cuda.PrecisionFP32)
	if err := causallm.CheckInference(gpu); err != nil {
		t.Fatalf("%v: the GPU check needs a lm.ptx with ga_span_attention (GELOATTACK_CUDA_PTX=<folder of rebuilt PTX>; the bundle's run.sh builds one)", err)
	}
	t.Logf("%s", gpu.Name())
	ref := newCPU(t, 2)
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			w, err := llama.Random(c, 21, 0.2, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := decoderAgreement(ref, gpu, w)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range a.bad {
				t.Error(b)
			}
			t.Logf("largest relative error, GPU against CPU: %s", a.summary())
		})
	}
}

// TestCUDADecoderThroughput logs (asserts nothing about speed) the Decoder's speed on the GPU at
// BenchmarkDecoderExtractLlama2Shape's shape (Llama-2-7B cut to 2 blocks, vocabulary 1024, fp32
// weights): tokens/s of Forward over 16 texts of 128 tokens with the block-1 residual tapped, as
// extraction runs (declared with TapOnly, as extraction does, and undeclared: every block's rows
// come to the host), whose rows must agree bit for bit; the time of one ForwardAlternatives of 256 candidates after a 16-token cache,
// as decode scores a prefix's bag; the weights' upload; and the peak device memory.
func TestCUDADecoderThroughput(t *testing.T) {
	gpu := cudatest.Open(t, cuda.PrecisionFP32)
	if err := causallm.CheckInference(gpu); err != nil {
		t.Fatalf("%v: the GPU check needs a lm.ptx with ga_span_attention (GELOATTACK_CUDA_PTX=<folder of rebuilt PTX>)", err)
	}
	c := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 1024, Hidden: 4096, Intermediate: 11008, Layers: 2,
		Heads: 32, KVHeads: 32, HeadDim: 128, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 4096}
	start := time.Now()
	m, err := llama.Random(c, 1, 0.02, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	drawn := time.Since(start)
	start = time.Now()
	dc, err := causallm.NewDecoder(gpu, m)
	if err != nil {
		t.Fatal(err)
	}
	upload := time.Since(start)
	t.Logf("Llama-2-7B shape, 2 blocks, vocab 1024: weights drawn in %.1f s, converted and uploaded (fp32) in %.2f s", drawn.Seconds(), upload.Seconds())

	const textLen, texts, reps = 128, 16, 5
	seqs := randomSeqs(texts, textLen, c.VocabSize)
	rows := make([]float32, textLen*texts*c.Hidden)
	tap := func(p llama.Point, layer int, x []float32) error {
		if p == llama.Residual && layer == 1 {
			copy(rows, x)
		}
		return nil
	}
	ctx := context.Background()
	var times []float64
	var every []float32 // the rows of the undeclared passes
	for _, declared := range []bool{false, true} {
		restore := func() {}
		if declared {
			restore = dc.TapOnly(causallm.TapPoint{Point: llama.Residual, Layer: 1})
		}
		times = times[:0]
		for i := range reps + 1 {
			start := time.Now()
			if err := dc.Forward(ctx, seqs, tap, nil); err != nil {
				t.Fatal(err)
			}
			if i > 0 { // the first pass warms the kernels and the tape's arena
				times = append(times, time.Since(start).Seconds())
			}
		}
		restore()
		sort.Float64s(times)
		t.Logf("extraction, taps declared %v: Forward of %d texts x %d tokens: median %.1f ms, %.0f tokens/s (fastest %.0f tokens/s)",
			declared, texts, textLen, 1e3*times[len(times)/2], textLen*texts/times[len(times)/2], textLen*texts/times[0])
		if !declared {
			every = append([]float32(nil), rows...)
		} else if !slices.Equal(rows, every) {
			t.Error("the declared tap's rows differ from the undeclared tap's")
		}
	}

	cache, err := dc.NewCache(17)
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.ForwardNext(ctx, cache, seqs[0][:16], nil, nil); err != nil {
		t.Fatal(err)
	}
	cands := make([]int32, 256)
	for i := range cands {
		cands[i] = int32(i)
	}
	alt := make([]float32, len(cands)*c.Hidden)
	altTap := func(p llama.Point, layer int, x []float32) error {
		if p == llama.AttnInput && layer == 1 {
			copy(alt, x)
		}
		return nil
	}
	times = times[:0]
	for i := range reps + 1 {
		start := time.Now()
		if err := dc.ForwardAlternatives(ctx, cache, cands, altTap); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			times = append(times, time.Since(start).Seconds())
		}
	}
	sort.Float64s(times)
	t.Logf("decoding: ForwardAlternatives of %d candidates after a 16-token cache: median %.1f ms (fastest %.1f ms), %.0f candidates/s",
		len(cands), 1e3*times[len(times)/2], 1e3*times[0], float64(len(cands))/times[len(times)/2])
	t.Logf("peak device memory %.2f GiB (weights %.2f GiB in fp32)", float64(gpu.PeakBytes())/(1<<30), float64(4*c.Params())/(1<<30))
}
