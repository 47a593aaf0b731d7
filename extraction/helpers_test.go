package extraction

// The tiny test model and the cached MiniLM loader, as models/bert's tests define them (test
// files do not cross packages).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
)

// tinyConfig is a small BERT for tests that need no download.
var tinyConfig = bert.Config{
	ModelType: "bert", HiddenSize: 8, NumLayers: 2, NumHeads: 2, IntermediateSize: 12,
	MaxPositions: 16, TypeVocabSize: 2, VocabSize: 20, LayerNormEps: 1e-12, HiddenAct: "gelu",
}

// tinyWeights draws every tensor of a BERT with cfg's shapes. Values are n/1024 with |n| <= 256, and
// LayerNorm weights 1 + n/128 with |n| <= 32: all need at most 8 significant bits, so they are exact
// in float16 and bfloat16 and all three file encodings hold the same model.
func tinyWeights(cfg bert.Config, seed uint64) map[string]struct {
	shape []int
	v     []float64
} {
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string]struct {
		shape []int
		v     []float64
	}{}
	add := func(name string, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(r.IntN(513)-256) / 1024
			if strings.HasSuffix(name, "LayerNorm.weight") {
				v[i] = 1 + float64(r.IntN(65)-32)/128
			}
		}
		out[name] = struct {
			shape []int
			v     []float64
		}{shape, v}
	}
	h, f := cfg.HiddenSize, cfg.IntermediateSize
	add("embeddings.word_embeddings.weight", cfg.VocabSize, h)
	add("embeddings.position_embeddings.weight", cfg.MaxPositions, h)
	add("embeddings.token_type_embeddings.weight", cfg.TypeVocabSize, h)
	add("embeddings.LayerNorm.weight", h)
	add("embeddings.LayerNorm.bias", h)
	for i := 0; i < cfg.NumLayers; i++ {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		for _, m := range []string{"query", "key", "value"} {
			add(p+"attention.self."+m+".weight", h, h)
			add(p+"attention.self."+m+".bias", h)
		}
		add(p+"attention.output.dense.weight", h, h)
		add(p+"attention.output.dense.bias", h)
		add(p+"attention.output.LayerNorm.weight", h)
		add(p+"attention.output.LayerNorm.bias", h)
		add(p+"intermediate.dense.weight", f, h)
		add(p+"intermediate.dense.bias", f)
		add(p+"output.dense.weight", h, f)
		add(p+"output.dense.bias", h)
		add(p+"output.LayerNorm.weight", h)
		add(p+"output.LayerNorm.bias", h)
	}
	return out
}

// writeTinyModel writes config.json and model.safetensors (in dtype) into a new directory.
func writeTinyModel(t *testing.T, cfg bert.Config, prefix string, dtype safetensors.DType, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	// The values are exact in every dtype, so the writer's rounding leaves them as drawn.
	weights := tinyWeights(cfg, seed)
	names := slices.Sorted(maps.Keys(weights))
	specs := make([]safetensors.Spec, len(names))
	for i, name := range names {
		specs[i] = safetensors.Spec{Name: prefix + name, DType: dtype, Shape: weights[name].shape}
	}
	var buf bytes.Buffer
	sw, err := safetensors.NewWriter(&buf, map[string]string{"format": "pt"}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		x := make([]float32, len(weights[name].v))
		for i, v := range weights[name].v {
			x[i] = float32(v)
		}
		if err := sw.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// refForward is a float64 textbook BERT on a PADDED batch with an attention mask: sequences are
// padded with token 0 to the longest length and padded keys get a -1e30 score. It returns, per
// sequence, the valid rows of every layer's output (index 0 = embeddings) and the pooled embedding.

// loadMiniLM loads the cached all-MiniLM-L6-v2 model and tokenizer, or skips the test.
func loadMiniLM(t testing.TB) (*bert.Model, *wordpiece.Tokenizer) {
	t.Helper()
	dir, err := corpus.DefaultModelDir()
	if err != nil {
		t.Skipf("no model cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("model not downloaded (%v); run scripts/fetch-data.sh model", err)
	}
	m, err := bert.LoadModel(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wordpiece.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}
func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
