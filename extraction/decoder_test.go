package extraction

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// byteTokenizer is a test tokenizer: a BOS (id 256) then one id per byte.
type byteTokenizer struct{ bos bool }

func (b byteTokenizer) Encode(text string, add bool) ([]int, error) {
	var out []int
	if add && b.bos {
		out = append(out, 256)
	}
	for _, c := range []byte(text) {
		out = append(out, int(c))
	}
	return out, nil
}
func (byteTokenizer) VocabSize() int { return 257 }
func (byteTokenizer) Hash() string   { return "bytes" }

type textRec struct {
	id        int64
	pos, toks []int32
	rows, emb []float32
}

type decSink struct{ texts []textRec }

func (s *decSink) AddTextAt(id int64, _ string, _ bool, pos, toks []int32, rows, emb []float32) error {
	s.texts = append(s.texts, textRec{id, slices.Clone(pos), slices.Clone(toks), slices.Clone(rows), slices.Clone(emb)})
	return nil
}

func decoderModel(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.Random(llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 260, Hidden: 32, Intermediate: 48,
		Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 1e4, MaxPositions: 64}, 3, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// alone runs one text through Forward and returns its rows at (point, layer) and its final rows.
func alone(t *testing.T, m *llama.Model, ids []int32, p llama.Point, layer int) (rows, final []float32) {
	t.Helper()
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	err = dc.Forward(context.Background(), [][]int32{ids}, func(q llama.Point, l int, x []float32) error {
		if q == p && l == layer {
			rows = slices.Clone(x)
		}
		if q == llama.Residual && l == m.Cfg.Layers {
			final = slices.Clone(x)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rows, final
}

// The stored rows are the model's rows at the chosen point and layer, and the text embedding is
// the normalised mean of the final-norm rows without BOS.
func TestRunDecoderRows(t *testing.T) {
	m := decoderModel(t)
	texts := []corpus.Text{{ID: 1, Text: "hello"}, {ID: 2, Text: "a"}, {ID: 3, Text: "a longer text of bytes"}}
	d := m.Cfg.Hidden
	for _, p := range []llama.Point{llama.Residual, llama.AttnInput} {
		for _, drop := range []bool{false, true} {
			var sink decSink
			st, err := RunDecoder(context.Background(), m, byteTokenizer{bos: true}, texts,
				DecoderOptions{Layer: 2, Point: p, Workers: 2, BatchTokens: 24, DropBOS: drop}, &sink)
			if err != nil {
				t.Fatal(err)
			}
			if len(sink.texts) != 3 || st.Tokens != 6+2+23 {
				t.Fatalf("%d texts, %d tokens", len(sink.texts), st.Tokens)
			}
			for i, tx := range texts {
				ids := []int32{256}
				for _, c := range []byte(tx.Text) {
					ids = append(ids, int32(c))
				}
				rows, final := alone(t, m, ids, p, 2)
				got := sink.texts[i]
				first := 0
				if drop {
					first = 1
				}
				if int(got.pos[0]) != first || !slices.Equal(got.toks, ids[first:]) {
					t.Fatalf("%v drop %v text %d: positions %v tokens %v", p, drop, i, got.pos, got.toks)
				}
				if e := rel(got.rows, rows[first*d:]); e > 1e-5 {
					t.Fatalf("%v text %d: rows differ from Forward alone by %g", p, i, e)
				}
				want := make([]float32, d)
				for r := 1; r < len(ids); r++ {
					for j := range want {
						want[j] += final[r*d+j] / float32(len(ids)-1)
					}
				}
				var ss float64
				for _, v := range want {
					ss += float64(v * v)
				}
				for j := range want {
					want[j] /= float32(math.Sqrt(ss))
				}
				if e := rel(got.emb, want); e > 1e-5 {
					t.Fatalf("text %d: embedding differs by %g", i, e)
				}
			}
		}
	}
}

func rel(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / den
}

// Exact dedup drops rows whose prefix was seen (a causal model's row is a function of its prefix):
// BOS rows after the first, shared prefixes, and a text that is a prefix of an earlier one.
func TestRunDecoderDedup(t *testing.T) {
	m := decoderModel(t)
	texts := []corpus.Text{{ID: 1, Text: "abc"}, {ID: 2, Text: "abd"}, {ID: 3, Text: "abc x"}, {ID: 4, Text: "ab"}}
	for _, half := range []bool{false, true} {
		var sink decSink
		st, err := RunDecoder(context.Background(), m, byteTokenizer{bos: true}, texts,
			DecoderOptions{Layer: 1, Workers: 2, BatchTokens: 8, Dedup: true, Float16: half}, &sink)
		if err != nil {
			t.Fatal(err)
		}
		// abc: 4 kept; abd: BOS a b dropped; abc x: BOS a b c dropped; ab: all 3 dropped.
		if st.DuplicateRows != 3+4+3 || st.DroppedTexts != 1 || len(sink.texts) != 3 || st.StoredRows != 4+1+2 {
			t.Fatalf("float16 %v: %d duplicates, %d dropped texts, %d stored, %d rows", half, st.DuplicateRows, st.DroppedTexts, len(sink.texts), st.StoredRows)
		}
		if !slices.Equal(sink.texts[2].pos, []int32{4, 5}) {
			t.Fatalf("positions of the kept rows: %v", sink.texts[2].pos)
		}
	}
}

// A decoder store records its extraction in meta.json, which survives a reopen.
func TestRunDecoderStoreMeta(t *testing.T) {
	m := decoderModel(t)
	dir := filepath.Join(t.TempDir(), "s")
	w, err := store.Create(dir, store.Meta{Model: "x", Layer: 1, D: 32, E: 32, DType: store.Float16, Norm: store.NormRaw, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := RunDecoder(context.Background(), m, byteTokenizer{}, []corpus.Text{{ID: 1, Text: "abc"}, {ID: 2, Text: "abd"}},
		DecoderOptions{Layer: 1, Point: llama.AttnInput, Dedup: true, Float16: true}, w)
	if err != nil {
		t.Fatal(err)
	}
	if st.BOS != "none" || st.DuplicateRows != 2 {
		t.Fatalf("bos %q, %d duplicates", st.BOS, st.DuplicateRows)
	}
	dm := store.DecoderMeta{Family: "llama", Architecture: "LlamaForCausalLM", Point: "attn-input", BOS: st.BOS,
		TokenizerHash: "bytes", Dedup: "exact", DuplicateRows: st.DuplicateRows, Embedding: DecoderEmbedding}
	w.SetDecoder(dm)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Meta().Decoder; got == nil || *got != dm {
		t.Fatalf("meta decoder %+v, want %+v", got, dm)
	}
	if s.NumTokens(1) != 1 {
		t.Fatalf("text 2 has %d rows, want 1 (the d)", s.NumTokens(1))
	}
}

// Bad options are errors.
func TestRunDecoderRefuses(t *testing.T) {
	m := decoderModel(t)
	texts := []corpus.Text{{ID: 1, Text: "x"}}
	for name, opt := range map[string]DecoderOptions{
		"attn-input past the last block": {Layer: 3, Point: llama.AttnInput},
		"layer past final":               {Layer: 4},
		"max tokens":                     {MaxTokens: 65},
		"norm":                           {Norm: "l2"},
	} {
		if _, err := RunDecoder(context.Background(), m, byteTokenizer{}, texts, opt, &decSink{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	small, _ := llama.Random(llama.Config{VocabSize: 100, Hidden: 8, Intermediate: 8, Layers: 1, Heads: 2, KVHeads: 2, HeadDim: 4, RMSEps: 1e-5, RopeTheta: 1e4, MaxPositions: 8}, 1, 0.1, nil)
	if _, err := RunDecoder(context.Background(), small, byteTokenizer{}, texts, DecoderOptions{}, &decSink{}); err == nil {
		t.Error("tokenizer larger than the vocabulary: no error")
	}
}
