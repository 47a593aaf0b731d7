package llama_test

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

// BenchmarkExtractLlama2Shape measures extraction throughput (tokens/s through the model, one
// layer's rows copied out as `store extract` does) on a Llama-2-7B-shaped model cut to 2 layers:
// d 4096, 32 heads, intermediate 11008. The vocabulary is cut to 1024 because extraction computes
// no logits: the embedding is a row lookup, so its size changes memory, not time. Texts are 128
// tokens, 16 per batch of 2048 tokens, on GOMAXPROCS workers with single-threaded BLAS calls.
//
// GELOATTACK_BENCH_MODEL=DIR benchmarks a Hugging Face directory instead, e.g. the checkpoint
// that bench/torch_llama.py times:
//
//	geloattack model init -like llama2-7b -layers 2 -vocab 1024 -dtype f32 -seed 1 -out /tmp/l2
//	GELOATTACK_BENCH_MODEL=/tmp/l2 go test ./models/llama -run '^$' -bench ExtractLlama2Shape -benchtime 5x
func BenchmarkExtractLlama2Shape(b *testing.B) {
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
	const textLen, texts = 128, 16
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]int32, texts)
	for i := range seqs {
		seqs[i] = make([]int32, textLen)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(m.Cfg.VocabSize))
		}
	}
	ws, err := m.NewWorkspace(textLen*texts, textLen, 0)
	if err != nil {
		b.Fatal(err)
	}
	lib := m.Lib()
	prev := lib.Threads()
	lib.SetThreads(1)
	defer lib.SetThreads(prev)
	rows := make([]float32, textLen*texts*m.Cfg.Hidden)
	tap := func(p llama.Point, layer int, x []float32) error {
		if p == llama.Residual && layer == 1 {
			copy(rows, x)
		}
		return nil
	}
	b.ResetTimer()
	for b.Loop() {
		if err := m.Forward(context.Background(), ws, seqs, tap, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*textLen*texts)/b.Elapsed().Seconds(), "tokens/s")
}
