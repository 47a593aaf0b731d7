package bert_test

import (
	"context"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// embedTexts returns the sentence embeddings of texts, (len(texts), h).
func embedTexts(t testing.TB, m *bert.Model, tok *wordpiece.Tokenizer, texts []string) []float32 {
	t.Helper()
	seqs := make([][]int32, len(texts))
	total := 0
	for i, s := range texts {
		seqs[i] = tok.Encode(s, 256)
		total += len(seqs[i])
	}
	ws, err := m.NewWorkspace(max(total, 256), 256, 0)
	if err != nil {
		t.Fatal(err)
	}
	pooled := make([]float32, len(texts)*m.Hidden())
	if err := m.Forward(context.Background(), ws, seqs, m.NumLayers(), nil, pooled); err != nil {
		t.Fatal(err)
	}
	return pooled
}

// TestMiniLMPublishedSimilarities reproduces the cosine similarities that the sentence-transformers
// documentation prints for all-MiniLM-L6-v2:
//   - https://sbert.net/docs/sentence_transformer/usage/usage.html (quickstart: weather/sunny/stadium)
//   - https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html (movie/cat/guitar)
//
// The published values have 4 decimals; the weights here are the fp16 copy of the model, so the
// test asks for agreement to 3 decimals (|diff| < 5e-4).
func TestMiniLMPublishedSimilarities(t *testing.T) {
	m, tok, _ := berttest.MiniLM(t)
	h := m.Hidden()
	check := func(a, b []string, want [][]float64) {
		t.Helper()
		ea := embedTexts(t, m, tok, a)
		eb := embedTexts(t, m, tok, b)
		for i := range a {
			if n := berttest.Dot(ea[i*h:(i+1)*h], ea[i*h:(i+1)*h]); math.Abs(n-1) > 1e-5 {
				t.Errorf("|emb(%q)|^2 = %v, want 1", a[i], n)
			}
			for j := range b {
				got := berttest.Dot(ea[i*h:(i+1)*h], eb[j*h:(j+1)*h])
				t.Logf("cos(%q, %q) = %.4f (published %.4f)", a[i], b[j], got, want[i][j])
				if math.Abs(got-want[i][j]) >= 5e-4 {
					t.Errorf("cos(%q, %q) = %.5f, published %.4f", a[i], b[j], got, want[i][j])
				}
			}
		}
	}
	quick := []string{"The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."}
	check(quick, quick, [][]float64{
		{1.0000, 0.6660, 0.1046},
		{0.6660, 1.0000, 0.1411},
		{0.1046, 0.1411, 1.0000},
	})
	check(
		[]string{"The new movie is awesome", "The cat sits outside", "A man is playing guitar"},
		[]string{"The dog plays in the garden", "The new movie is so great", "A woman watches TV"},
		[][]float64{
			{0.0543, 0.8939, -0.0502},
			{0.2838, -0.0029, 0.1310},
			{0.2277, -0.0136, -0.0327},
		})
}

// TestTensorsNameTheCheckpoint: bert.Tensors of the MiniLM's config.json names every tensor of
// its published checkpoint, with the file's shapes, but the three the forward pass never reads.
func TestTensorsNameTheCheckpoint(t *testing.T) {
	m, _, dir := berttest.MiniLM(t)
	hdr, err := safetensors.ReadHeader(filepath.Join(dir, "model.fp16.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	inFile := map[string][]int{}
	for _, info := range hdr.Tensors {
		inFile[info.Name] = info.Shape
	}
	specs := bert.Tensors(m.Cfg)
	if want := 5 + 16*m.Cfg.NumLayers; len(specs) != want {
		t.Errorf("%d tensors listed, want 5 embedding tensors and 16 a block: %d", len(specs), want)
	}
	for _, s := range specs {
		shape, ok := inFile[s.Name]
		if !ok || !slices.Equal(shape, s.Shape) {
			t.Errorf("%s %v: the checkpoint has %v (present: %v)", s.Name, s.Shape, shape, ok)
		}
		delete(inFile, s.Name)
	}
	unread := slices.Sorted(maps.Keys(inFile))
	if want := []string{"embeddings.position_ids", "pooler.dense.bias", "pooler.dense.weight"}; !slices.Equal(unread, want) {
		t.Errorf("tensors of the checkpoint not listed: %v, want %v", unread, want)
	}
}
