// Package berttest is test support for models/bert and the packages that run it (extraction,
// protocol/equality): small BERT checkpoints drawn from a seed and written as Hugging Face writes
// them, and the cached all-MiniLM-L6-v2. Only tests import it.
package berttest

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
)

// Tiny is a small BERT (h 8, 2 blocks, a vocabulary of 20) for tests that need no download.
func Tiny() bert.Config {
	return bert.Config{
		ModelType: "bert", HiddenSize: 8, NumLayers: 2, NumHeads: 2, IntermediateSize: 12,
		MaxPositions: 16, TypeVocabSize: 2, VocabSize: 20, LayerNormEps: 1e-12, HiddenAct: "gelu",
	}
}

// Weights holds a value for every tensor of bert.Tensors(cfg), by name.
type Weights map[string][]float32

// Exact draws every tensor of a BERT with cfg's shapes: values n/1024 with |n| <= 256, and
// LayerNorm weights 1 + n/128 with |n| <= 32. All need at most 8 significant bits, so they are
// exact in float16 and bfloat16, and a checkpoint in any of the three dtypes holds the same model.
func Exact(cfg bert.Config, seed uint64) Weights {
	r := rand.New(rand.NewPCG(seed, 1))
	return draw(cfg, func(s bert.TensorSpec) float64 {
		v := float64(r.IntN(513)-256) / 1024
		if isNormWeight(s) {
			v = 1 + float64(r.IntN(65)-32)/128
		}
		return v
	})
}

// Gaussian draws every tensor of a BERT with cfg's shapes from normal laws: matrices with std
// 1/sqrt(fan-in), embeddings 0.1, biases biasStd (so a test can make them large next to x W^T),
// LayerNorm weights 1 + 0.1 N(0, 1).
func Gaussian(cfg bert.Config, seed uint64, biasStd float64) Weights {
	r := rand.New(rand.NewPCG(seed, 7))
	return draw(cfg, func(s bert.TensorSpec) float64 {
		std := 0.1
		switch {
		case isNormWeight(s):
			std = 0
		case strings.HasSuffix(s.Name, "bias"):
			std = biasStd
		case len(s.Shape) == 2 && !strings.Contains(s.Name, "embeddings"):
			std = 1 / math.Sqrt(float64(s.Shape[1]))
		}
		v := std * r.NormFloat64()
		if isNormWeight(s) {
			v = 1 + 0.1*r.NormFloat64()
		}
		return v
	})
}

// draw fills every tensor of cfg, element by element in bert.Tensors' order, with value.
func draw(cfg bert.Config, value func(s bert.TensorSpec) float64) Weights {
	w := Weights{}
	for _, s := range bert.Tensors(cfg) {
		x := make([]float32, s.Elems())
		for i := range x {
			x[i] = float32(value(s))
		}
		w[s.Name] = x
	}
	return w
}

func isNormWeight(s bert.TensorSpec) bool { return strings.HasSuffix(s.Name, "LayerNorm.weight") }

// Write writes cfg as config.json and w as model.safetensors (each name after prefix, rounded to
// dtype, in bert.Tensors' order) into a new temporary directory, and returns the directory.
func Write(t testing.TB, cfg bert.Config, w Weights, prefix string, dtype safetensors.DType) string {
	t.Helper()
	dir := t.TempDir()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tensors := bert.Tensors(cfg)
	specs := make([]safetensors.Spec, len(tensors))
	for i, s := range tensors {
		specs[i] = safetensors.Spec{Name: prefix + s.Name, DType: dtype, Shape: s.Shape}
	}
	var raw bytes.Buffer
	sw, err := safetensors.NewWriter(&raw, map[string]string{"format": "pt"}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tensors {
		if err := sw.WriteTensor(w[s.Name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"config.json": js, "model.safetensors": raw.Bytes()} {
		if err := safefile.WriteFileAtomic(filepath.Join(dir, name), b); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// MiniLM loads the cached all-MiniLM-L6-v2 and its tokenizer and returns them with the model's
// directory. Without the download the test is skipped, or fails where CI fetched the data
// (GELOATTACK_REQUIRE_REAL_STORE=1).
func MiniLM(t testing.TB) (*bert.Model, *wordpiece.Tokenizer, string) {
	t.Helper()
	dir, err := corpus.DefaultModelDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "config.json"))
	}
	if err != nil {
		if os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") == "1" {
			t.Fatalf("GELOATTACK_REQUIRE_REAL_STORE=1 but the model is missing: %v", err)
		}
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
	return m, tok, dir
}
