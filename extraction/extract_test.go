package extraction

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// memSink keeps every text it is given.
type memSink struct {
	ids    []int64
	texts  []string
	tokens [][]int32
	rows   [][]float32
	embs   [][]float32
	failAt int // AddText fails on this call (1-based); 0 never
}

func (s *memSink) AddText(id int64, text string, hasText bool, tokenIDs []int32, rows, emb []float32) error {
	if s.failAt > 0 && len(s.ids)+1 == s.failAt {
		return errors.New("sink full")
	}
	s.ids = append(s.ids, id)
	s.texts = append(s.texts, text)
	s.tokens = append(s.tokens, slices.Clone(tokenIDs))
	s.rows = append(s.rows, slices.Clone(rows))
	s.embs = append(s.embs, slices.Clone(emb))
	return nil
}

// tinySetup gives the tiny test model with a toy tokenizer over its 20-token vocabulary.
func tinySetup(t *testing.T) (*bert.Model, *wordpiece.Tokenizer) {
	t.Helper()
	cfg := berttest.Tiny()
	m, err := bert.LoadModel(berttest.Write(t, cfg, berttest.Exact(cfg, 3), "", safetensors.F32), blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int32{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
	for i, w := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "##s", "##t", ".", ","} {
		vocab[w] = int32(5 + i)
	}
	tok, err := wordpiece.New(vocab, wordpiece.BertUncased())
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

var tinyTexts = []corpus.Text{
	{ID: 10, Text: "a b c"}, {ID: 11, Text: "d e f g h a b c d e f"}, {ID: 12, Text: "as at."}, {ID: 13, Text: "h"},
	{ID: 14, Text: "a, b, c, d, e, f, g, h"}, {ID: 15, Text: "zz"}, {ID: 16, Text: "b b b"},
}

func TestRunMatchesSingleTextForward(t *testing.T) {
	m, tok := tinySetup(t)
	h := m.Hidden()
	for _, layer := range []int{0, 1, 2} {
		sink := &memSink{}
		// A budget of 16 tokens forces several batches of several texts.
		st, err := Run(context.Background(), m, tok, tinyTexts, Options{Layer: layer, BatchTokens: 16, MaxTokens: 10}, sink)
		if err != nil {
			t.Fatal(err)
		}
		if st.Texts != int64(len(tinyTexts)) || len(sink.ids) != len(tinyTexts) {
			t.Fatalf("layer %d: %d texts in stats, %d in sink, want %d", layer, st.Texts, len(sink.ids), len(tinyTexts))
		}
		if st.Truncated != 2 { // texts 11 and 14 exceed 10 tokens
			t.Errorf("layer %d: %d truncated, want 2", layer, st.Truncated)
		}
		ws, err := m.NewWorkspace(16, 16, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, tx := range tinyTexts {
			if sink.ids[i] != tx.ID || sink.texts[i] != tx.Text {
				t.Fatalf("position %d: got text %d %q, want %d %q (input order)", i, sink.ids[i], sink.texts[i], tx.ID, tx.Text)
			}
			want := tok.Encode(tx.Text, 10)
			if !slices.Equal(sink.tokens[i], want) {
				t.Errorf("text %d: token ids %v, want %v", tx.ID, sink.tokens[i], want)
			}
			// The text alone through the encoder: packing with other texts must not change a value.
			hidden := make([]float32, len(want)*h)
			pooled := make([]float32, h)
			if err := m.Forward(context.Background(), ws, [][]int32{want}, layer, hidden, pooled); err != nil {
				t.Fatal(err)
			}
			if d := berttest.MaxDiff(sink.rows[i], hidden); d > 1e-5 || len(sink.rows[i]) != len(hidden) {
				t.Errorf("layer %d text %d: rows differ from the text alone by %g (len %d vs %d)", layer, tx.ID, d, len(sink.rows[i]), len(hidden))
			}
			if d := berttest.MaxDiff(sink.embs[i], pooled); d > 1e-5 {
				t.Errorf("layer %d text %d: embedding differs from the text alone by %g", layer, tx.ID, d)
			}
		}
	}
}

func TestRunOptions(t *testing.T) {
	m, tok := tinySetup(t)
	h := m.Hidden()
	ctx := context.Background()
	full := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2}, full); err != nil {
		t.Fatal(err)
	}

	// DropSpecial removes exactly the first and last row and id.
	drop := &memSink{}
	st, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2, DropSpecial: true}, drop)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for i := range tinyTexts {
		n := len(full.tokens[i])
		if !slices.Equal(drop.tokens[i], full.tokens[i][1:n-1]) || berttest.MaxDiff(drop.rows[i], full.rows[i][h:(n-1)*h]) != 0 || len(drop.rows[i]) != (n-2)*h {
			t.Errorf("text %d: drop-special did not remove exactly [CLS] and [SEP]", tinyTexts[i].ID)
		}
		if berttest.MaxDiff(drop.embs[i], full.embs[i]) != 0 {
			t.Errorf("text %d: drop-special changed the sentence embedding", tinyTexts[i].ID)
		}
		rows += int64(n - 2)
	}
	if st.StoredRows != rows {
		t.Errorf("StoredRows = %d, want %d", st.StoredRows, rows)
	}

	// NormRMS: every stored row has unit RMS and points the same way as the raw row.
	rms := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2, Norm: NormRMS}, rms); err != nil {
		t.Fatal(err)
	}
	for i := range tinyTexts {
		for r := 0; r < len(rms.rows[i]); r += h {
			var ss, dot, rr float64
			for j := 0; j < h; j++ {
				a, b := float64(rms.rows[i][r+j]), float64(full.rows[i][r+j])
				ss += a * a
				dot += a * b
				rr += b * b
			}
			if math.Abs(ss/float64(h)-1) > 1e-4 || math.Abs(dot/math.Sqrt(ss*rr)-1) > 1e-6 {
				t.Fatalf("text %d row %d: mean square %g, cosine to raw %g", tinyTexts[i].ID, r/h, ss/float64(h), dot/math.Sqrt(ss*rr))
			}
		}
	}

	// MaxTexts keeps a prefix.
	few := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 1, MaxTexts: 3}, few); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(few.ids, []int64{10, 11, 12}) {
		t.Errorf("MaxTexts 3 gave ids %v", few.ids)
	}

	bad := map[string]Options{
		"layer 3":          {Layer: 3},
		"max tokens 1":     {MaxTokens: 1},
		"max tokens 17":    {MaxTokens: 17},
		"budget below len": {MaxTokens: 10, BatchTokens: 9},
		"norm l2":          {Norm: "l2"},
		"negative texts":   {MaxTexts: -1},
	}
	for name, o := range bad {
		if _, err := Run(ctx, m, tok, tinyTexts, o, &memSink{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A failing sink stops the run with its error, naming the text.
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 1, BatchTokens: 16}, &memSink{failAt: 4}); err == nil || !strings.Contains(err.Error(), "sink full") || !strings.Contains(err.Error(), "id 13") {
		t.Errorf("failing sink: got %v", err)
	}
	// A cancelled context stops the run.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Run(cctx, m, tok, tinyTexts, Options{Layer: 1, BatchTokens: 16}, &memSink{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: got %v, want context.Canceled", err)
	}
}

// TestMiniLMRunReproducesPublished runs the whole pipeline (several texts per batch, the layer
// rows of one layer, the pooled embedding) and checks one published similarity through it.
func TestMiniLMRunReproducesPublished(t *testing.T) {
	m, tok, _ := berttest.MiniLM(t)
	texts := []corpus.Text{{ID: 1, Text: "The weather is lovely today."}, {ID: 2, Text: "It's so sunny outside!"}, {ID: 3, Text: "He drove to the stadium."}}
	sink := &memSink{}
	if _, err := Run(context.Background(), m, tok, texts, Options{Layer: 6, MaxTokens: 256, BatchTokens: 512}, sink); err != nil {
		t.Fatal(err)
	}
	if got := berttest.Dot(sink.embs[0], sink.embs[1]); math.Abs(got-0.6660) >= 5e-4 {
		t.Errorf("cos = %.4f, published 0.6660", got)
	}
	// Layer 6 is the last layer, so the stored rows' mean, normalised, is the sentence embedding.
	h := m.Hidden()
	mean := make([]float64, h)
	n := len(sink.rows[2]) / h
	for r := 0; r < n; r++ {
		for j := 0; j < h; j++ {
			mean[j] += float64(sink.rows[2][r*h+j])
		}
	}
	var nrm float64
	for _, v := range mean {
		nrm += v * v
	}
	for j := range mean {
		if d := math.Abs(mean[j]/math.Sqrt(nrm) - float64(sink.embs[2][j])); d > 1e-5 {
			t.Fatalf("dim %d: pooled last-layer rows differ from the embedding by %g", j, d)
		}
	}
}
