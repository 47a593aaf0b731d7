package content

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// Embedders of two blocks sharing one caller's decoder give the rows of embedders with decoders
// of their own; a decoder of other weights is refused.
func TestDecoderEmbedderSharesADecoder(t *testing.T) {
	cfg := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 260, Hidden: 96, Intermediate: 256,
		Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 24, RMSEps: 1e-5, RopeTheta: 1e4, MaxPositions: 128}
	m, err := llama.Random(cfg, 7, 0.02, nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	texts := []string{"the cat sat", "on a rug at noon"}
	for _, layer := range []int{0, 1} {
		meta := decoderMeta(store.Float32, false)
		meta.Layer = layer
		own, err := NewDecoderEmbedder(m, nil, byteTok{}, meta)
		if err != nil {
			t.Fatal(err)
		}
		shared, err := NewDecoderEmbedder(m, dc, byteTok{}, meta)
		if err != nil {
			t.Fatal(err)
		}
		a, err := own.Embed(context.Background(), texts, 64, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := shared.Embed(context.Background(), texts, 64, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Data) == 0 || !slices.Equal(a.Data, b.Data) || !slices.Equal(a.Off, b.Off) {
			t.Errorf("block %d: the shared decoder's rows differ from the embedder's own", layer)
		}
	}
	other, err := llama.Random(cfg, 8, 0.02, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDecoderEmbedder(other, dc, byteTok{}, decoderMeta(store.Float32, false)); err == nil || !strings.Contains(err.Error(), "other weights") {
		t.Errorf("a decoder of other weights: %v", err)
	}
}
