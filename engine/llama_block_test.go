package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/llama"
)

// TestDecoderBlockMatchesLlama: one Llama decoder block written with the
// engine's ops (RMSNorm, Linear, RoPE on q and k, grouped-query
// CausalAttention, SwiGLU) gives models/llama's block output (the residual
// entering block 1) for a random model with 6 query heads on 2 kv heads and
// sequences of 11 tokens: an independent check of RoPE's layout and
// positions and of the attention's head grouping and causality against the
// host decoder the attacks use.
func TestDecoderBlockMatchesLlama(t *testing.T) {
	cfg := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 97, Hidden: 48, Intermediate: 80, Layers: 2,
		Heads: 6, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
	const B, T = 3, 11
	m, err := llama.Random(cfg, 27, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(27, 5))
	seqs := make([][]int32, B)
	for b := range seqs {
		seqs[b] = make([]int32, T)
		for i := range seqs[b] {
			seqs[b][i] = int32(r.IntN(cfg.VocabSize))
		}
	}
	ws, err := m.NewWorkspace(B*T, T, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want []float32 // (B*T, d): the input of block 1
	tap := func(p llama.Point, layer int, x []float32) error {
		if p == llama.Residual && layer == 1 {
			want = append([]float32(nil), x...)
		}
		return nil
	}
	if err := m.Forward(context.Background(), ws, seqs, tap, nil); err != nil {
		t.Fatal(err)
	}
	if len(want) != B*T*cfg.Hidden {
		t.Fatalf("the tap saw %d values of block 1's input, want %d", len(want), B*T*cfg.Hidden)
	}

	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetMinWork(1)
	tp := engine.NewTape(c)
	d, hd, f := cfg.Hidden, cfg.HeadDim, cfg.Intermediate
	qw, kw := cfg.QDim(), cfg.KVDim()
	w := func(p llama.Part) []float32 { // block 0's weight p (the embedding for llama.Embedding)
		x, err := m.Storage(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	emb := make([]float32, 0, B*T*d)
	for _, s := range seqs {
		for _, id := range s {
			emb = append(emb, w(llama.Embedding)[int(id)*d:(int(id)+1)*d]...)
		}
	}
	tab, err := engine.RoPETable(T, hd, cfg.RopeTheta)
	if err != nil {
		t.Fatal(err)
	}
	eps := float32(cfg.RMSEps)
	x := tp.Input(emb, B*T, d)                               // (B*T, d)
	xn := tp.RMSNorm(x, tp.Input(w(llama.AttnNorm), d), eps) // (B*T, d)
	table := tp.Input(tab, T, hd)                            // (T, hd)
	q := tp.RoPE(tp.Linear(xn, tp.Input(w(llama.QProj), qw, d)), table, cfg.Heads)
	k := tp.RoPE(tp.Linear(xn, tp.Input(w(llama.KProj), kw, d)), table, cfg.KVHeads)
	v := tp.Linear(xn, tp.Input(w(llama.VProj), kw, d))
	att := tp.CausalAttention(tp.Reshape(q, B, T, qw), tp.Reshape(k, B, T, kw), tp.Reshape(v, B, T, kw), cfg.Heads, cfg.KVHeads)
	h := tp.Add(x, tp.Linear(tp.Reshape(att, B*T, qw), tp.Input(w(llama.OProj), d, qw)))
	hn := tp.RMSNorm(h, tp.Input(w(llama.MLPNorm), d), eps)
	act := tp.SwiGLU(tp.Linear(hn, tp.Input(w(llama.GateProj), f, d)), tp.Linear(hn, tp.Input(w(llama.UpProj), f, d)))
	out := tp.Add(h, tp.Linear(act, tp.Input(w(llama.DownProj), d, f)))
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	got := out.ToHost()
	var worst float64
	for i, w := range want {
		diff := math.Abs(float64(got[i] - w))
		worst = max(worst, diff/(1+math.Abs(float64(w))))
		if diff > 1e-4*(1+math.Abs(float64(w))) {
			t.Fatalf("block 0 output [%d] (sequence %d, position %d): engine %.7g, llama %.7g", i, i/(T*d), (i/d)%T, got[i], w)
		}
	}
	t.Logf("largest relative difference %.2g", worst)
}
