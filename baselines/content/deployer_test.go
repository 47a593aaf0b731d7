package content

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// Known answer: the rows an external deployer computed for every token (BOS included, raw), laid
// out by FromDeployer, are the rows Embed gives for the store's layout: the BOS row dropped where
// the store drops it, RMS-normalised where the store normalises, rounded to float16 where the store
// holds float16. The deployer here is this repository's forward with the BOS row kept, so the two
// differ by the recomputation error of an fp32 deployer at most; the token ids and positions are
// equal.
func TestFromDeployerLaysOutRowsAsTheStore(t *testing.T) {
	ctx := context.Background()
	texts := []string{"my PIN is 1603 ok", "we ate at noon", "a"}
	full := testDecoder(t, decoderMeta(store.Float32, false)) // the deployer: every row, raw
	dep, err := full.Embed(ctx, texts, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	rmsDrop := decoderMeta(store.Float32, true)
	rmsDrop.Norm = store.NormRMS
	for name, meta := range map[string]store.Meta{
		"float16, BOS dropped": decoderMeta(store.Float16, true),
		"float32, BOS kept":    decoderMeta(store.Float32, false),
		"rms, BOS dropped":     rmsDrop,
	} {
		emb := testDecoder(t, meta)
		want, err := emb.Embed(ctx, texts, 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := emb.DeployerTexts(texts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := emb.FromDeployer(texts, func(i int, text DeployerText) ([]float32, error) {
			if !slices.Equal(text.Tokens, dep.IDs[i]) || text.BOS != 1 {
				t.Errorf("%s: text %d: deployer input %v (bos %d), want %v (bos 1)", name, i, text.Tokens, text.BOS, dep.IDs[i])
			}
			return dep.Text(i), nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rho, err := DefaultRecompute(emb, "fp32")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Off, want.Off) || got.D != want.D || len(in) != len(texts) {
			t.Fatalf("%s: offsets %v width %d, want %v width %d", name, got.Off, got.D, want.Off, want.D)
		}
		for i := range texts {
			if !slices.Equal(got.IDs[i], want.IDs[i]) || !slices.Equal(got.Pos[i], want.Pos[i]) {
				t.Errorf("%s: text %d: ids %v at %v, want %v at %v", name, i, got.IDs[i], got.Pos[i], want.IDs[i], want.Pos[i])
			}
		}
		d := want.D
		for r := 0; r < want.Off[len(want.Off)-1]; r++ {
			var diff, norm float64
			for c := 0; c < d; c++ {
				x, y := float64(want.Data[r*d+c]), float64(got.Data[r*d+c])
				diff += (x - y) * (x - y)
				norm += x * x
			}
			if rel := math.Sqrt(diff / norm); !(rel <= rho.Rho) {
				t.Errorf("%s: row %d: %.3g relative from Embed's, beyond the fp32 deployer's rho %.3g", name, r, rel, rho.Rho)
			}
		}
		if meta.DType == store.Float16 {
			// Every value is a float16 one, as the store writer leaves them.
			r := slices.Clone(got.Data)
			store.RoundFloat16(r)
			if !slices.Equal(r, got.Data) {
				t.Errorf("%s: rows not rounded to float16", name)
			}
		}
		if meta.Norm == store.NormRMS {
			// RMS-normalised rows have mean square 1, which raw rows of this init do not.
			var ms float64
			for _, v := range got.Text(0)[:d] {
				ms += float64(v) * float64(v) / float64(d)
			}
			if math.Abs(ms-1) > 1e-3 {
				t.Errorf("%s: first row's mean square %.4g, want 1", name, ms)
			}
		}
	}
	// Rows of another length are refused, and so is an encoder store.
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	_, err = emb.FromDeployer(texts, func(i int, _ DeployerText) ([]float32, error) { return dep.Text(i)[dep.D:], nil })
	if err == nil || !strings.Contains(err.Error(), "values for") {
		t.Errorf("rows one token short: %v", err)
	}
}

// testEncoder is a tiny random BERT (berttest.Tiny: h 8, 2 blocks) with a WordPiece vocabulary of
// its 20 ids, and its embedder for meta.
func testEncoder(t *testing.T, meta store.Meta) *Embedder {
	t.Helper()
	cfg := berttest.Tiny()
	m, err := bert.LoadModel(berttest.Write(t, cfg, berttest.Gaussian(cfg, 3, 0.1), "", safetensors.F32), blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int32{}
	for i, w := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "my", "pin", "is", "16", "##03", "we", "ate", "at", "noon", "a", "ok"} {
		vocab[w] = int32(i)
	}
	tok, err := wordpiece.New(vocab, wordpiece.BertUncased())
	if err != nil {
		t.Fatal(err)
	}
	emb, err := NewEmbedder(m, tok, meta)
	if err != nil {
		t.Fatal(err)
	}
	return emb
}

// Known answer, encoders: the rows an external encoder deployer computed for every token ([CLS]
// and [SEP] included, raw), laid out by FromDeployer, are the rows Embed gives for the store's
// layout: [CLS] and [SEP] dropped where the store drops them (the rest numbered from 0, as
// extraction.Run stores them), RMS-normalised, rounded to float16. The deployer is this
// repository's forward keeping every row; the ids and positions are equal, the rows within the
// fp32 deployer's rho.
func TestFromDeployerLaysOutEncoderRowsAsTheStore(t *testing.T) {
	ctx := context.Background()
	texts := []string{"my PIN is 1603 ok", "we ate at noon", "a"}
	meta := func(dtype, special, norm string) store.Meta {
		return store.Meta{D: 8, E: 8, Layer: 2, DType: dtype, Norm: norm, SpecialTokens: special, MaxTokens: 16}
	}
	full := testEncoder(t, meta(store.Float32, store.SpecialKept, store.NormRaw))
	dep, err := full.Embed(ctx, texts, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, mt := range map[string]store.Meta{
		"float16, special dropped": meta(store.Float16, store.SpecialDropped, store.NormRaw),
		"float32, special kept":    meta(store.Float32, store.SpecialKept, store.NormRaw),
		"float16, kept, rms":       meta(store.Float16, store.SpecialKept, store.NormRMS),
	} {
		emb := testEncoder(t, mt)
		want, err := emb.Embed(ctx, texts, 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := emb.FromDeployer(texts, func(i int, text DeployerText) ([]float32, error) {
			if !slices.Equal(text.Tokens, dep.IDs[i]) || text.BOS != 1 || text.Tokens[0] != 2 || text.Tokens[len(text.Tokens)-1] != 3 {
				t.Errorf("%s: text %d: deployer input %v (bos %d), want %v framed by [CLS] 2 (bos 1) and [SEP] 3", name, i, text.Tokens, text.BOS, dep.IDs[i])
			}
			return dep.Text(i), nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rho, err := DefaultRecompute(emb, "fp32")
		if err != nil {
			t.Fatal(err)
		}
		if !sameLayout(got, want) {
			t.Fatalf("%s: layout %v %v %v, want %v %v %v", name, got.Off, got.IDs, got.Pos, want.Off, want.IDs, want.Pos)
		}
		g, err := RowGap(got, want)
		if err != nil || !(g.Max <= rho.Rho) {
			t.Errorf("%s: rows %+v (%v) from Embed's, beyond the fp32 deployer's rho %.3g", name, g, err, rho.Rho)
		}
		if mt.SpecialTokens == store.SpecialDropped && got.Off[1] != len(dep.IDs[0])-2 {
			t.Errorf("%s: text 0 keeps %d rows of %d tokens, want [CLS] and [SEP] dropped", name, got.Off[1], len(dep.IDs[0]))
		}
	}
}

// Known answer: RowGap is the relative row difference against the reference b, its largest and
// its median; rows of other texts or positions are refused.
func TestRowGap(t *testing.T) {
	b := &Rows{D: 2, Off: []int{0, 2, 3}, Data: []float32{3, 4, 1, 0, 0, 2},
		IDs: [][]int32{{5, 6}, {7}}, Pos: [][]int32{{1, 2}, {1}}}
	a := &Rows{D: 2, Off: b.Off, IDs: b.IDs, Pos: b.Pos, Data: []float32{3, 4, 1, 0.5, 0, 2}}
	g, err := RowGap(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if g.Max != 0.5 || g.Median != 0 || g.Rows != 3 {
		t.Errorf("gap %+v, want max 0.5 (row 1: 0.5 off a row of norm 1), median 0, 3 rows", g)
	}
	c := *a
	c.Pos = [][]int32{{0, 1}, {1}}
	if _, err := RowGap(&c, b); err == nil {
		t.Error("rows at other positions: no error")
	}
}
