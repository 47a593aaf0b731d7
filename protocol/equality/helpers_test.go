package equality

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// tinyConfig is a random-weights BERT small enough for every test to run all runs in well under a
// second, and wide enough (h 32) for rounding to behave like a real model's.
var tinyConfig = bert.Config{
	ModelType: "bert", HiddenSize: 32, NumLayers: 2, NumHeads: 4, IntermediateSize: 64,
	MaxPositions: 64, TypeVocabSize: 2, VocabSize: 50, LayerNormEps: 1e-12, HiddenAct: "gelu",
}

// tinyModel loads a BERT of cfg's shapes with gaussian weights drawn from seed
// (berttest.Gaussian: biases of std biasStd, so a test can make them large next to x W^T).
func tinyModel(t testing.TB, cfg bert.Config, seed uint64, biasStd float64) *bert.Model {
	t.Helper()
	m, err := bert.LoadModel(berttest.Write(t, cfg, berttest.Gaussian(cfg, seed, biasStd), "", safetensors.F32), blas.Default())
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
