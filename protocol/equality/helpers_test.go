package equality

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
)

// tinyConfig is a random-weights BERT small enough for every test to run all runs in well under a
// second, and wide enough (h 32) for rounding to behave like a real model's.
var tinyConfig = bert.Config{
	ModelType: "bert", HiddenSize: 32, NumLayers: 2, NumHeads: 4, IntermediateSize: 64,
	MaxPositions: 64, TypeVocabSize: 2, VocabSize: 50, LayerNormEps: 1e-12, HiddenAct: "gelu",
}

// tinyModel writes a BERT with cfg's shapes and gaussian weights (std 1/sqrt(fan-in) for
// matrices, 0.1 for embeddings) into a temporary directory and loads it. Biases have std
// biasStd, so a test can make them large next to x W^T.
func tinyModel(t testing.TB, cfg bert.Config, seed uint64, biasStd float64) *bert.Model {
	t.Helper()
	dir := t.TempDir()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	var specs []safetensors.Spec
	var data [][]float32
	add := func(name string, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		std := 0.1
		switch {
		case strings.HasSuffix(name, "LayerNorm.weight"):
			std = 0
		case strings.HasSuffix(name, "bias"):
			std = biasStd
		case len(shape) == 2 && !strings.Contains(name, "embeddings"):
			std = 1 / math.Sqrt(float64(shape[1]))
		}
		x := make([]float32, n)
		for i := range x {
			v := std * r.NormFloat64()
			if strings.HasSuffix(name, "LayerNorm.weight") {
				v = 1 + 0.1*r.NormFloat64()
			}
			x[i] = float32(v)
		}
		specs = append(specs, safetensors.Spec{Name: name, DType: safetensors.F32, Shape: shape})
		data = append(data, x)
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
	var raw bytes.Buffer
	sw, err := safetensors.NewWriter(&raw, map[string]string{"format": "pt"}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range data {
		if err := sw.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), raw.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := bert.LoadModel(dir, blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tinyInputs draws n token sequences of 3..maxLen tokens, [CLS] = 2 ... [SEP] = 3, with ids 10..
// so that they look like text ids of a real source.
func tinyInputs(n, maxLen, vocab int, seed uint64) []Input {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([]Input, n)
	for i := range out {
		t := 3 + r.IntN(maxLen-2)
		toks := make([]int32, t)
		toks[0], toks[t-1] = 2, 3
		for j := 1; j < t-1; j++ {
			toks[j] = int32(5 + r.IntN(vocab-5))
		}
		out[i] = Input{ID: int64(10 + i), Tokens: toks}
	}
	return out
}

// testConfig is DefaultConfig trimmed for tests: protocol fields only matter to Evaluate.
func testConfig() Config {
	c := DefaultConfig()
	c.BatchTokens = 256
	c.Workers = 2
	return c
}

// requireReal reports whether a missing real model or corpus must fail the test rather than
// skip it: CI sets GELOATTACK_REQUIRE_REAL_STORE=1 after fetching the data.
func requireReal() bool { return os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") == "1" }

// miniLM loads the cached all-MiniLM-L6-v2 and its tokenizer, or skips the test.
func miniLM(t testing.TB) (*bert.Model, *wordpiece.Tokenizer, string) {
	t.Helper()
	dir, err := corpus.DefaultModelDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "config.json"))
	}
	if err != nil {
		if requireReal() {
			t.Fatalf("GELOATTACK_REQUIRE_REAL_STORE=1 but the model is missing: %v", err)
		}
		t.Skipf("model not downloaded (%v); run scripts/fetch-data.sh model", err)
	}
	m, err := bert.LoadModel(dir, blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wordpiece.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m, tok, dir
}

// relErr is ||got - want||_F / ||want||_F over float32 slices.
func relErr(got, want []float32) float64 {
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - float64(w)
		num += d * d
		den += float64(w) * float64(w)
	}
	return math.Sqrt(num / den)
}

// linearRef is x (t, in) . w^T (w: (out, in)) + b in float64, returned as float32.
func linearRef(x []float32, t, in int, w, b []float32, out int) []float32 {
	y := make([]float32, t*out)
	for r := 0; r < t; r++ {
		for o := 0; o < out; o++ {
			s := float64(b[o])
			for i := 0; i < in; i++ {
				s += float64(x[r*in+i]) * float64(w[o*in+i])
			}
			y[r*out+o] = float32(s)
		}
	}
	return y
}
