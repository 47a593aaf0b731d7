package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// The compute precision and the candidate embedding go through meta.json and back; left at their
// defaults they are absent from the file (the bytes of a default store stay those of stores
// written before the fields) and read as fp32 and final; unknown values are refused on open.
func TestComputationMetaRoundTrip(t *testing.T) {
	const d, e = 6, 6
	texts := makeTexts(5, 4, 5, d, e)
	write := func(t *testing.T, prec, emb string) (string, []byte) {
		dir := filepath.Join(t.TempDir(), "s")
		w, err := Create(dir, Meta{Model: "m", Layer: 2, D: d, E: e, DType: Float32, Norm: NormRaw, Source: "test", ComputePrecision: prec})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range texts {
			if err := w.AddText(x.id, x.text, x.hasText, x.tokens, x.rows, x.emb); err != nil {
				t.Fatal(err)
			}
		}
		w.SetDecoder(DecoderMeta{Family: "llama", Architecture: "LlamaForCausalLM", Point: "attn-input", BOS: SpecialKept, Dedup: "none", Embedding: "e", CandidateEmbedding: emb})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		raw, err := safefile.Read(filepath.Join(dir, MetaFile), safefile.StoreMeta)
		if err != nil {
			t.Fatal(err)
		}
		return dir, raw
	}
	cases := []struct{ prec, emb, rowPrec, recompute, kind string }{
		{"", "", PrecisionFP32, "fp32", EmbeddingFinal},
		{PrecisionTF32, EmbeddingStored, PrecisionTF32, "fp16", EmbeddingStored},
		{PrecisionBF16, EmbeddingFinal, PrecisionBF16, "bf16", EmbeddingFinal},
	}
	for _, c := range cases {
		t.Run(c.rowPrec+"-"+c.kind, func(t *testing.T) {
			dir, raw := write(t, c.prec, c.emb)
			hasPrec, hasEmb := bytes.Contains(raw, []byte(`"compute_precision"`)), bytes.Contains(raw, []byte(`"candidate_embedding"`))
			if hasPrec != (c.prec != "") || hasEmb != (c.emb != "") {
				t.Fatalf("meta.json holds compute_precision %v, candidate_embedding %v; want %v, %v:\n%s", hasPrec, hasEmb, c.prec != "", c.emb != "", raw)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := s.Meta()
			if m.ComputePrecision != c.prec || m.Decoder.CandidateEmbedding != c.emb {
				t.Fatalf("read back compute_precision %q, candidate_embedding %q; wrote %q, %q", m.ComputePrecision, m.Decoder.CandidateEmbedding, c.prec, c.emb)
			}
			if m.RowPrecision() != c.rowPrec || m.RecomputePrecision() != c.recompute || m.CandidateEmbeddingKind() != c.kind {
				t.Fatalf("RowPrecision %q, RecomputePrecision %q, CandidateEmbeddingKind %q; want %q, %q, %q",
					m.RowPrecision(), m.RecomputePrecision(), m.CandidateEmbeddingKind(), c.rowPrec, c.recompute, c.kind)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		for _, bad := range []struct{ from, to, want string }{
			{`"compute_precision": "bf16"`, `"compute_precision": "fp8"`, `compute_precision = "fp8"`},
			{`"candidate_embedding": "stored"`, `"candidate_embedding": "first"`, `candidate_embedding = "first"`},
		} {
			dir, raw := write(t, PrecisionBF16, EmbeddingStored)
			edited := bytes.Replace(raw, []byte(bad.from), []byte(bad.to), 1)
			if bytes.Equal(edited, raw) {
				t.Fatalf("meta.json has no %s:\n%s", bad.from, raw)
			}
			if err := os.WriteFile(filepath.Join(dir, MetaFile), edited, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("open with %s: %v, want an error naming %s", bad.to, err, bad.want)
			}
		}
	})
	if (Meta{}).CandidateEmbeddingKind() != "" {
		t.Error("a store without a decoder section has a candidate embedding kind")
	}
}
