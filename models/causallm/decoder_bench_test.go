package causallm_test

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

// BenchmarkDecoderExtractLlama2Shape is models/llama's BenchmarkExtractLlama2Shape on the engine
// Decoder (same model, texts and tap): extraction throughput in tokens/s on a Llama-2-7B-shaped
// model cut to 2 layers (d 4096, 32 heads, intermediate 11008, vocabulary cut to 1024), 16 texts
// of 128 tokens a batch, on a CPU backend of GOMAXPROCS workers. GELOATTACK_BENCH_MODEL=DIR
// benchmarks a Hugging Face directory instead (a BF16 one exercises the per-pass conversion).
func BenchmarkDecoderExtractLlama2Shape(b *testing.B) {
	var m *llama.Model
	var err error
	if dir := os.Getenv("GELOATTACK_BENCH_MODEL"); dir != "" {
		m, err = hf.Load(dir, nil)
	} else {
		m, err = llama.Random(llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 1024, Hidden: 4096,
			Intermediate: 11008, Layers: 2, Heads: 32, KVHeads: 32, HeadDim: 128, RMSEps: 1e-5,
			RopeTheta: 10000, MaxPositions: 4096}, 1, 0.02, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	dc, err := causallm.NewDecoder(be, m)
	if err != nil {
		b.Fatal(err)
	}
	const textLen, texts = 128, 16
	seqs := randomSeqs(texts, textLen, m.Cfg.VocabSize)
	rows := make([]float32, textLen*texts*m.Cfg.Hidden)
	tap := func(p llama.Point, layer int, x []float32) error {
		if p == llama.Residual && layer == 1 {
			copy(rows, x)
		}
		return nil
	}
	b.ResetTimer()
	for b.Loop() {
		if err := dc.Forward(context.Background(), seqs, tap, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*textLen*texts)/b.Elapsed().Seconds(), "tokens/s")
}

// randomSeqs are n texts of length token ids drawn uniformly from a vocabulary of vocab, the same
// on every call (one seed): the input of the extraction benchmark and the GPU tests.
func randomSeqs(n, length, vocab int) [][]int32 {
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]int32, n)
	for i := range seqs {
		seqs[i] = make([]int32, length)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(vocab))
		}
	}
	return seqs
}
