package extraction

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/llama"
)

// firstBlocks is m's blocks 0..blocks-1 as a model of their own (llama.Assemble over m's float32
// weights), as hf.LoadWith's Blocks loads a directory.
func firstBlocks(t *testing.T, m *llama.Model, blocks int) *llama.Model {
	t.Helper()
	cut, err := llama.Assemble(m.Cfg, nil, blocks, func(tn llama.Tensor) (llama.Stored, error) {
		x, err := m.Storage(tn.Part, tn.Block)
		if err != nil {
			return llama.Stored{}, err
		}
		raw := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		return llama.Stored{DType: llama.F32, Raw: raw}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cut
}

// DecoderBlocks: the stored rows' blocks, every block for the final norm's.
func TestDecoderBlocks(t *testing.T) {
	for _, c := range []struct {
		p            llama.Point
		layer, want  int
		finalOrEmpty string
	}{
		{llama.Residual, 0, 1, store.EmbeddingStored}, {llama.Residual, 2, 2, store.EmbeddingStored},
		{llama.Residual, 3, 3, store.EmbeddingStored}, {llama.AttnInput, 0, 1, store.EmbeddingStored},
		{llama.AttnInput, 2, 3, store.EmbeddingStored}, {llama.AttnInput, 1, 3, store.EmbeddingFinal}, {llama.Residual, 0, 3, ""},
	} {
		if got := DecoderBlocks(c.p, c.layer, 3, c.finalOrEmpty); got != c.want {
			t.Errorf("DecoderBlocks(%v, %d, 3, %q) = %d, want %d", c.p, c.layer, c.finalOrEmpty, got, c.want)
		}
	}
}

// With the stored embedding, a model of only DecoderBlocks blocks gives the same rows as the whole
// model (within two fp32 evaluations' bound; the same bits under OpenBLAS) (the blocks after the layer add nothing to them), and each text's
// embedding is the normalised mean of its own rows at the layer without BOS, computed here
// from the rows Forward gives it alone; -norm rms and -dedup change the stored rows, not the
// embedding. The final embedding needs every block, and an unknown choice is refused.
func TestRunDecoderStoredEmbedding(t *testing.T) {
	m := decoderModel(t)
	d := m.Cfg.Hidden
	texts := []corpus.Text{{ID: 1, Text: "hello"}, {ID: 2, Text: "a"}, {ID: 3, Text: "a longer text of bytes"}, {ID: 4, Text: "hello again"}}
	ctx := context.Background()
	// The same products on the same batches: the same bits under OpenBLAS; gonum's kernels round
	// by the operands' alignment, which differs between the two models' weights, so the bound of
	// two fp32 evaluations of the blocks' products decides.
	tol := fptol.Chain(6*m.Cfg.Layers, max(m.Cfg.Hidden, m.Cfg.Intermediate), fptol.Float32)
	for _, c := range []struct {
		p     llama.Point
		layer int
	}{{llama.Residual, 0}, {llama.Residual, 2}, {llama.AttnInput, 1}, {llama.Residual, 3}} {
		blocks := DecoderBlocks(c.p, c.layer, m.Cfg.Layers, store.EmbeddingStored)
		cut := firstBlocks(t, m, blocks)
		opt := DecoderOptions{Layer: c.layer, Point: c.p, Workers: 2, BatchTokens: 24, Embedding: store.EmbeddingStored, Norm: NormRMS, Dedup: true}
		var whole, part decSink
		if _, err := RunDecoder(ctx, m, byteTokenizer{bos: true}, texts, opt, &whole); err != nil {
			t.Fatal(err)
		}
		if _, err := RunDecoder(ctx, cut, byteTokenizer{bos: true}, texts, opt, &part); err != nil {
			t.Fatalf("%v %d on %d blocks: %v", c.p, c.layer, blocks, err)
		}
		if len(part.texts) != len(texts) || len(whole.texts) != len(texts) {
			t.Fatalf("%d and %d texts, want %d", len(part.texts), len(whole.texts), len(texts))
		}
		for i, tx := range texts {
			a, b := whole.texts[i], part.texts[i]
			if rel(a.rows, b.rows) > tol || rel(a.emb, b.emb) > tol {
				t.Fatalf("%v %d text %d: %d blocks give rows %g, embedding %g from every block's", c.p, c.layer, i, blocks, rel(b.rows, a.rows), rel(b.emb, a.emb))
			}
			ids := []int32{256}
			for _, ch := range []byte(tx.Text) {
				ids = append(ids, int32(ch))
			}
			rows, final := alone(t, m, ids, c.p, c.layer)
			want, wantFinal := meanNoBOS(rows, len(ids), d), meanNoBOS(final, len(ids), d)
			if e := rel(b.emb, want); e > 1e-5 {
				t.Fatalf("%v %d text %d: embedding differs from the mean of its rows by %g", c.p, c.layer, i, e)
			}
			if c.layer < m.Cfg.Layers && !(rel(b.emb, wantFinal) > 1e-3) {
				t.Fatalf("%v %d text %d: the stored embedding is the final one (%g apart)", c.p, c.layer, i, rel(b.emb, wantFinal))
			}
		}
		if blocks < m.Cfg.Layers {
			_, err := RunDecoder(ctx, cut, byteTokenizer{bos: true}, texts, DecoderOptions{Layer: c.layer, Point: c.p}, &decSink{})
			if err == nil || !strings.Contains(err.Error(), "final norm") {
				t.Errorf("the final embedding on %d of %d blocks: %v, want a refusal", blocks, m.Cfg.Layers, err)
			}
		}
	}
	if _, err := RunDecoder(ctx, firstBlocks(t, m, 1), byteTokenizer{}, texts, DecoderOptions{Layer: 2, Embedding: store.EmbeddingStored}, &decSink{}); err == nil || !strings.Contains(err.Error(), "need blocks 0..1") {
		t.Errorf("residual 2 on 1 block: %v, want a refusal naming blocks 0..1", err)
	}
	if _, err := RunDecoder(ctx, m, byteTokenizer{}, texts, DecoderOptions{Embedding: "first"}, &decSink{}); err == nil || !strings.Contains(err.Error(), `"first"`) {
		t.Errorf("embedding first: %v, want a refusal", err)
	}
	if _, err := DecoderEmbeddingOf(""); err != nil {
		t.Error(err)
	}
}

// meanNoBOS is the L2-normalised mean of rows 1..n-1 of x (n, d).
func meanNoBOS(x []float32, n, d int) []float32 {
	want := make([]float32, d)
	for r := 1; r < n; r++ {
		for j := range want {
			want[j] += x[r*d+j] / float32(n-1)
		}
	}
	var ss float64
	for _, v := range want {
		ss += float64(v * v)
	}
	for j := range want {
		want[j] /= float32(math.Sqrt(ss))
	}
	return want
}
