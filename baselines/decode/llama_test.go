package decode

import (
	"context"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/models/llama"
)

// tinyLlama is a random-init Llama-family decoder: width 64, 3 blocks, grouped-query attention,
// a vocabulary of 200.
func tinyLlama(t *testing.T) *Llama {
	t.Helper()
	cfg := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 200, Hidden: 64, Intermediate: 128, Layers: 3,
		Heads: 8, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
	m, err := llama.Random(cfg, 7, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLlama(nil, m, 32)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The model's incremental rows are its full forward's: Extend and Append through the KV cache give
// the rows Rows gives for the whole text, at every attacked block.
func TestLlamaPrefixMatchesTheForward(t *testing.T) {
	l := tinyLlama(t)
	text := []int{5, 17, 17, 3, 150, 42}
	full, err := l.Rows(text, 3)
	if err != nil {
		t.Fatal(err)
	}
	d := l.D()
	var p Prefix = l.NewPrefix()
	buf := make([]float32, 2*d)
	for pos, tok := range text {
		if err := p.Extend([]int{tok}, 3, buf); err != nil {
			t.Fatal(err)
		}
		for b := 1; b < 3; b++ {
			got, want := buf[(b-1)*d:b*d], full[b][pos*d:(pos+1)*d]
			for i := range got {
				if diff := got[i] - want[i]; diff > 1e-4 || diff < -1e-4 {
					t.Fatalf("position %d block %d [%d]: Extend %v, forward %v", pos, b, i, got[i], want[i])
				}
			}
		}
		if p, err = p.Append(tok); err != nil {
			t.Fatal(err)
		}
	}
	b0 := make([]float32, d)
	if err := l.Block0(text[0], text[0]+1, b0); err != nil {
		t.Fatal(err)
	}
	for i := range b0 {
		if diff := b0[i] - full[0][i]; diff > 1e-5 || diff < -1e-5 {
			t.Fatalf("block 0 row of token %d [%d]: %v, forward %v", text[0], i, b0[i], full[0][i])
		}
	}
}

// The CI case on a random-init decoder: 4 texts, bf16, 5% shields at scale 10 — every text
// read back exactly and claimed, nothing else claimed.
func TestLlamaDecodeRecoversEveryText(t *testing.T) {
	l := tinyLlama(t)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	cfg.ObserveDtype = gelo.ObserveBF16
	res, err := Run(context.Background(), l, sourceTexts(40, 200, 3), Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("batch %d: n %d rank %v bag %d (P %.2f R %.2f, margin %.2f) order margin %.2f exact %.2f acc %.2f claims %d/%d decoded %d, %d forwards in %.2f s",
			r.Index, r.N, r.Rank, len(r.Bag), r.BagPrecision, r.BagRecall, r.BagMargin, r.OrderMargin, r.Exact, r.TokenAcc, r.ClaimsRight, r.Claims, len(r.Decoded), r.Forwards, r.Seconds)
		if r.Exact != 1 || r.ClaimsRight != len(r.Truth) || r.Claims != r.ClaimsRight {
			t.Errorf("batch %d: exact %.2f, claims %d (right %d) of %d texts", r.Index, r.Exact, r.Claims, r.ClaimsRight, len(r.Truth))
		}
	}
}

// Padded to full rank (64 shield rows on width 64): weak shields are read back by the leverage
// ranking; strong shields stop it; nothing is claimed wrongly in either. (The top-k ranking is
// tested on the toy, TestToyOrderByTopK.)
func TestLlamaDecodePastFullRank(t *testing.T) {
	checkPastFullRank(t, tinyLlama(t), sourceTexts(40, 200, 3))
}
