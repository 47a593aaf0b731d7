package causallm_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// decoderFamilies are the architectures a checkpoint may carry: Llama-2 (MHA, untied), grouped
// queries with tied embeddings and llama3 rope scaling, Qwen2 (q/k/v biases) and Qwen3 (q/k norms,
// head_dim not hidden/heads).
func decoderFamilies() map[string]llama.Config {
	base := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 97, Hidden: 48, Intermediate: 80, Layers: 3,
		Heads: 6, KVHeads: 6, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
	gqa := base
	gqa.KVHeads, gqa.TiedEmbeddings, gqa.RopeTheta = 2, true, 500000
	gqa.Rope = llama.RopeScaling{Kind: llama.RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 16}
	qwen2 := base
	qwen2.KVHeads, qwen2.QKVBias, qwen2.RMSEps, qwen2.RopeTheta = 3, true, 1e-6, 1e6
	qwen3 := base
	qwen3.KVHeads, qwen3.HeadDim, qwen3.QKNorm, qwen3.TiedEmbeddings = 2, 16, true, true
	return map[string]llama.Config{"llama2": base, "gqa-llama3rope": gqa, "qwen2-bias": qwen2, "qwen3-qknorm": qwen3}
}

func newCPU(t *testing.T, workers int) engine.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

type taps map[[2]int][]float32 // (point, layer) -> rows

func (tp taps) tap(p llama.Point, l int, x []float32) error {
	tp[[2]int{int(p), l}] = append([]float32(nil), x...)
	return nil
}

func tokens(seed uint64, vocab, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

func maxRel(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / math.Max(den, 1e-30)
}

// Through the cache: the prefix, then the rest one token at a time and as a chunk, gives the rows
// of the whole sequence at once; alternatives give each candidate's row as if appended alone, and
// leave the cache as it was.
func TestDecoderCacheAndAlternatives(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			w, err := llama.Random(c, 5, 0.2, nil)
			if err != nil {
				t.Fatal(err)
			}
			dc, err := causallm.NewDecoder(newCPU(t, 2), w)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			seq := tokens(9, c.VocabSize, 12)
			full := taps{}
			if err := dc.Forward(ctx, [][]int32{seq}, full.tap, nil); err != nil {
				t.Fatal(err)
			}
			d := c.Hidden
			tol := fptol.Chain(6*c.Layers+1, max(c.Hidden, c.Intermediate, 12), fptol.Float32)
			cache, err := dc.NewCache(16)
			if err != nil {
				t.Fatal(err)
			}
			if err := dc.ForwardNext(ctx, cache, seq[:7], nil, nil); err != nil {
				t.Fatal(err)
			}
			branch, err := dc.Clone(cache)
			if err != nil {
				t.Fatal(err)
			}
			// Alternatives after the 7-token prefix: candidate 0 is the true token 7.
			alts := []int32{seq[7], 3, seq[7], 50}
			alt := taps{}
			if err := dc.ForwardAlternatives(ctx, cache, alts, alt.tap); err != nil {
				t.Fatal(err)
			}
			if cache.Len() != 7 {
				t.Fatalf("alternatives changed the cache to %d tokens", cache.Len())
			}
			for l := 0; l < c.Layers; l++ {
				k := [2]int{int(llama.AttnInput), l}
				if e := maxRel(alt[k][:d], full[k][7*d:8*d]); e > tol {
					t.Errorf("layer %d: the true alternative's row differs from the full pass by %g (bound %g)", l, e, tol)
				}
				if e := maxRel(alt[k][2*d:3*d], alt[k][:d]); e != 0 {
					t.Errorf("layer %d: the same candidate twice gives rows %g apart", l, e)
				}
				if e := maxRel(alt[k][d:2*d], full[k][7*d:8*d]); e < 1e-3 {
					t.Errorf("layer %d: another candidate's row equals the true one's (%g)", l, e)
				}
			}
			// The rest one token at a time on the clone, and as one chunk on the cache.
			step := taps{}
			for i := 7; i < len(seq); i++ {
				one := taps{}
				if err := dc.ForwardNext(ctx, branch, seq[i:i+1], one.tap, nil); err != nil {
					t.Fatal(err)
				}
				for k, x := range one {
					step[k] = append(step[k], x...)
				}
			}
			chunk := taps{}
			if err := dc.ForwardNext(ctx, cache, seq[7:], chunk.tap, nil); err != nil {
				t.Fatal(err)
			}
			for l := 0; l < c.Layers; l++ {
				k := [2]int{int(llama.AttnInput), l}
				if e := maxRel(step[k], full[k][7*d:]); e > tol {
					t.Errorf("layer %d: token by token differs from the full pass by %g (bound %g)", l, e, tol)
				}
				if e := maxRel(chunk[k], full[k][7*d:]); e > tol {
					t.Errorf("layer %d: a chunk after the cache differs from the full pass by %g (bound %g)", l, e, tol)
				}
			}
			if cache.Len() != len(seq) || branch.Len() != len(seq) {
				t.Fatalf("caches hold %d and %d tokens, want %d", cache.Len(), branch.Len(), len(seq))
			}
		})
	}
}

// Bad input is refused with the value named, before any work.
func TestDecoderRefusesBadInput(t *testing.T) {
	c := decoderFamilies()["llama2"]
	w, err := llama.Random(c, 1, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := causallm.NewDecoder(newCPU(t, 1), w)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, call := range []func() error{
		func() error { return dc.Forward(ctx, [][]int32{{1, 97}}, nil, nil) },
		func() error { return dc.Forward(ctx, [][]int32{{}}, nil, nil) },
		func() error { return dc.Forward(ctx, [][]int32{make([]int32, 65)}, nil, nil) },
		func() error { return dc.Forward(ctx, [][]int32{{1, 2}}, nil, make([]float32, 5)) },
		func() error { _, err := dc.NewCache(0); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
}

// deviceLike hides the CPU backend's host memory, as a device backend would: the decoder uploads
// every weight once instead of computing from the model's memory.
type deviceLike struct{ engine.Backend }

func (d deviceLike) Unwrap() engine.Backend { return d.Backend }

// storedBF16 is the model m's weights of blocks 0..blocks-1 rounded to bfloat16, once as BF16
// bytes (a checkpoint the decoder converts block by block) and once as float32 values.
func storedBF16(t *testing.T, m *llama.Model, blocks int) (stored, rounded *llama.Model) {
	t.Helper()
	c := m.Cfg
	rounded, err := llama.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := map[[2]int][]byte{}
	for _, tn := range c.Tensors(c.Layers) {
		x, err := m.Storage(tn.Part, tn.Block)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := rounded.Storage(tn.Part, tn.Block)
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for i, v := range x {
			dst[i] = numfmt.RoundBF16(v)
			b = binary.LittleEndian.AppendUint16(b, numfmt.F32ToBF16(v))
		}
		raw[[2]int{int(tn.Part), tn.Block}] = b
	}
	stored, err = llama.Assemble(c, nil, blocks, func(tn llama.Tensor) (llama.Stored, error) {
		return llama.Stored{DType: llama.BF16, Raw: raw[[2]int{int(tn.Part), tn.Block}]}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stored, rounded
}

// Where the weights live changes no bit: a BF16 checkpoint converted block by block into staging
// buffers, the same kept converted (all of it, or block 0's first matrices only, the rest staged),
// the same values as float32 computed in place, and every weight uploaded once (a device's way)
// give identical taps, logits and alternatives, also for a model of the first blocks only.
func TestDecoderPlacementsAgree(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			m, err := llama.Random(c, 11, 0.2, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, blocks := range []int{c.Layers, 2} {
				stored, rounded := storedBF16(t, m, blocks)
				be := newCPU(t, 2)
				var outs []taps
				for i, dec := range []struct {
					w    *llama.Model
					be   engine.Backend
					keep int64
				}{{stored, be, 0}, {stored, be, 1 << 40}, {stored, be, c.ScratchBytes() / 2}, {rounded, be, 0}, {rounded, deviceLike{be}, 0}} {
					dc, err := causallm.NewDecoder(dec.be, dec.w)
					if err != nil {
						t.Fatal(err)
					}
					dc.KeepConverted(dec.keep)
					got := taps{}
					seqs := [][]int32{tokens(4, c.VocabSize, 9), tokens(5, c.VocabSize, 6)}
					var logits []float32
					if blocks == c.Layers {
						logits = make([]float32, 15*c.VocabSize)
					}
					if err := dc.Forward(context.Background(), seqs, got.tap, logits); err != nil {
						t.Fatalf("placement %d: %v", i, err)
					}
					got[[2]int{-1, 0}] = logits
					cache, err := dc.NewCache(12)
					if err != nil {
						t.Fatal(err)
					}
					if err := dc.ForwardNext(context.Background(), cache, seqs[0][:5], nil, nil); err != nil {
						t.Fatal(err)
					}
					alt := taps{}
					if err := dc.ForwardAlternatives(context.Background(), cache, []int32{1, 2, 3}, alt.tap); err != nil {
						t.Fatal(err)
					}
					for k, x := range alt {
						got[[2]int{k[0] + 10, k[1]}] = x
					}
					outs = append(outs, got)
				}
				for i, o := range outs[1:] {
					for k, x := range outs[0] {
						if maxRel(o[k], x) != 0 || len(o[k]) != len(x) {
							t.Errorf("%d blocks, placement %d: %v differs from the staged BF16 checkpoint's", blocks, i+1, k)
						}
					}
				}
			}
		})
	}
}

// The pre-flight's byte counts hold what a decoder allocates after plain, cached and alternative
// passes at full length: its cache exactly (llama.Config.CacheBytes), the tape's peak within
// ActivationBytes (at most twice), tape and host rows within WorkspaceBytes, and the staging
// buffers of a BF16 checkpoint exactly (llama.Model.ScratchBytes).
func TestDecoderBytesBoundAllocations(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			stored, _ := storedBF16(t, randomWeights(t, c, 12), c.Layers)
			dc, err := causallm.NewDecoder(newCPU(t, 1), stored)
			if err != nil {
				t.Fatal(err)
			}
			const maxLen = 16
			ctx := context.Background()
			seq := tokens(13, c.VocabSize, maxLen)
			if err := dc.Forward(ctx, [][]int32{seq, seq}, nil, nil); err != nil {
				t.Fatal(err)
			}
			cache, err := dc.NewCache(maxLen)
			if err != nil {
				t.Fatal(err)
			}
			if err := dc.ForwardNext(ctx, cache, seq[:maxLen-1], nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := dc.ForwardAlternatives(ctx, cache, append(seq, seq...), nil); err != nil {
				t.Fatal(err)
			}
			if perPass, kept := dc.ConvertedBytes(); perPass != stored.ScratchBytes(false) || kept != 0 || perPass == 0 {
				t.Errorf("converted per pass %d bytes, kept %d; want ScratchBytes %d and nothing kept", perPass, kept, stored.ScratchBytes(false))
			}
			if got, want := 4*int64(cache.Cap()*c.KVDim()*2*len(cacheLayers(dc))), c.CacheBytes(maxLen); got != want {
				t.Errorf("cache holds %d bytes, CacheBytes %d", got, want)
			}
			held, peak := dc.TapeBytes()
			act := causallm.ActivationBytes(c, 2*maxLen)
			t.Logf("tape peak %d bytes, activations estimated %d (x%.2f); arena holds %d", peak, act, float64(act)/float64(peak), held)
			if act < peak || act > 2*peak {
				t.Errorf("ActivationBytes %d, the tape's peak %d: want peak <= estimate <= 2 x peak", act, peak)
			}
			if total, est := held+dc.HostBytes(), causallm.WorkspaceBytes(c, 2*maxLen, maxLen, 1); total > est {
				t.Errorf("the decoder holds %d bytes (tape %d, host %d), WorkspaceBytes %d", total, held, dc.HostBytes(), est)
			}
		})
	}
}

// KeepConverted keeps weights in the order the pass reaches them while they fit and converts the
// rest every pass: a budget of every block keeps all of them (llama.Config.BlockBytes bounds a
// block's) and converts nothing per pass; a budget of one block's matrices keeps block 0's, and
// the later blocks share per-pass buffers of ScratchBytes.
func TestDecoderKeepConverted(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			stored, _ := storedBF16(t, randomWeights(t, c, 12), c.Layers)
			block := stored.ScratchBytes(false)
			for _, tc := range []struct {
				keep, perPass, kept int64
			}{{1 << 40, 0, int64(c.Layers) * block}, {block, block, block}, {0, block, 0}} {
				dc, err := causallm.NewDecoder(newCPU(t, 1), stored)
				if err != nil {
					t.Fatal(err)
				}
				dc.KeepConverted(tc.keep)
				for range 2 {
					if err := dc.Forward(context.Background(), [][]int32{tokens(3, c.VocabSize, 5)}, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				perPass, kept := dc.ConvertedBytes()
				if perPass != tc.perPass || kept != tc.kept {
					t.Errorf("KeepConverted(%d): %d bytes converted per pass and %d kept, want %d and %d", tc.keep, perPass, kept, tc.perPass, tc.kept)
				}
				if kept > int64(c.Layers)*c.BlockBytes() {
					t.Errorf("KeepConverted(%d) kept %d bytes, more than the blocks' %d", tc.keep, kept, int64(c.Layers)*c.BlockBytes())
				}
			}
		})
	}
}

func cacheLayers(dc *causallm.Decoder) []int { return make([]int, dc.Blocks()) }
