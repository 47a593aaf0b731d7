package main

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/runner"
)

// lowPrecisionGPU is a CPU backend posing as a GPU whose GEMMs run in prec.
type lowPrecisionGPU struct {
	engine.Backend
	prec string
}

func (g lowPrecisionGPU) Precision() string      { return g.prec }
func (g lowPrecisionGPU) Unwrap() engine.Backend { return g.Backend }

// openLowPrecision opens lowPrecisionGPU in the precision asked for, recording it.
func openLowPrecision(asked *string) openFunc {
	return func(spec, precision string, log func(string)) (engine.Backend, error) {
		*asked = precision
		be, err := device.Open(device.CPU, device.FP32, nil)
		if err != nil {
			return nil, err
		}
		return lowPrecisionGPU{Backend: be, prec: precision}, nil
	}
}

// smallDecoderDir is a model init directory of 4 blocks at d 64 and a texts file.
func smallDecoderDir(t *testing.T) (dir, texts string) {
	t.Helper()
	tmp := t.TempDir()
	dir = filepath.Join(tmp, "m")
	if err := cmdModelInit.run(context.Background(), "geloattack model init", []string{"-like", "llama2-7b", "-layers", "4", "-hidden", "64", "-vocab", "300", "-seed", "3", "-out", dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	texts = filepath.Join(tmp, "texts.txt")
	if err := os.WriteFile(texts, []byte("the cat\nthe cat sat\nthe dog ran off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, texts
}

func byteTokOpener(string, int) (extraction.Tokenizer, error) { return byteTok{}, nil }

// tf32 and bf16 are refused where the CPU would compute: -device cpu before anything is opened or
// written, auto falling back to the CPU, and a backend that opens in fp32 whatever was asked.
func TestExtractPrecisionRefusedOnTheCPU(t *testing.T) {
	dir, texts := smallDecoderDir(t)
	ctx := context.Background()
	for _, prec := range []string{"tf32", "bf16"} {
		out := filepath.Join(t.TempDir(), "s")
		f := &fakeOpener{noGPU: true}
		err := runDecoderExtract(ctx, decoderExtract{modelDir: dir, texts: texts, out: out, dtype: store.Float32, norm: store.NormRaw,
			point: "residual", layer: 1, device: "cpu", precision: prec, open: f.open}, byteTokOpener)
		if err == nil || !strings.Contains(err.Error(), "-precision "+prec+" with -device cpu") || len(f.opened) != 0 {
			t.Errorf("-device cpu -precision %s: %v (opened %v), want a refusal before any backend opens", prec, err, f.opened)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("-device cpu -precision %s left %s behind", prec, out)
		}
		// auto where no GPU opens: device.Open falls back to the CPU (opened here for any spec).
		cpuOnly := func(_, precision string, log func(string)) (engine.Backend, error) {
			return device.Open(device.CPU, precision, log)
		}
		err = runDecoderExtract(ctx, decoderExtract{modelDir: dir, texts: texts, out: out, dtype: store.Float32, norm: store.NormRaw,
			point: "residual", layer: 1, device: "auto", precision: prec, open: cpuOnly}, byteTokOpener)
		if err == nil || !strings.Contains(err.Error(), "computes its GEMMs in fp32 only") || !strings.Contains(err.Error(), "on cpu") {
			t.Errorf("-device auto -precision %s without a GPU: %v, want a refusal naming the CPU", prec, err)
		}
		if _, err := openExtractDeviceWith("cuda", prec, nil, (&fakeOpener{}).open); err == nil || !strings.Contains(err.Error(), "in fp32 only") {
			t.Errorf("a GPU that opens in fp32 when %s is asked: %v, want a refusal", prec, err)
		}
	}
	if _, err := extractPrecision("fp16"); err == nil {
		t.Error("-precision fp16 accepted (the CUDA backend has no fp16 GEMMs)")
	}
}

// On a backend that computes in bf16, store extract records compute_precision bf16 and, with
// -embedding stored, candidate_embedding stored and its description; it loads only the blocks up
// to the layer (the pre-flight's weights part says so), and its rows are those of a default run
// (the fake GPU is a CPU).
func TestExtractRecordsPrecisionAndEmbedding(t *testing.T) {
	dir, texts := smallDecoderDir(t)
	ctx := context.Background()
	tmp := t.TempDir()
	var asked string
	run := func(out, prec, emb string, open openFunc) store.Meta {
		t.Helper()
		err := runDecoderExtract(ctx, decoderExtract{modelDir: dir, texts: texts, out: out, dtype: store.Float32, norm: store.NormRaw,
			point: "attn-input", layer: 1, device: "cuda", precision: prec, embedding: emb, open: open}, byteTokOpener)
		if err != nil {
			t.Fatal(err)
		}
		s, err := store.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Meta()
	}
	low := run(filepath.Join(tmp, "bf16"), "bf16", "stored", openLowPrecision(&asked))
	if asked != "bf16" {
		t.Fatalf("the backend was opened in %q, want bf16", asked)
	}
	if low.ComputePrecision != "bf16" || low.RecomputePrecision() != "bf16" || low.CandidateEmbeddingKind() != store.EmbeddingStored ||
		low.Decoder.Embedding != extraction.DecoderEmbeddingStored {
		t.Fatalf("meta: compute_precision %q, candidate_embedding %q, embedding %q", low.ComputePrecision, low.Decoder.CandidateEmbedding, low.Decoder.Embedding)
	}
	lowStore, err := store.Open(filepath.Join(tmp, "bf16"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := store.ComputeInfo(ctx, lowStore, 10, 0.1, 1)
	lowStore.Close()
	if err != nil || !strings.Contains(info.String(), "computed in") || !strings.Contains(info.String(), "bf16 GEMMs") {
		t.Errorf("store info of the bf16 store does not say so (%v):\n%s", err, info)
	}
	def := run(filepath.Join(tmp, "fp32"), "", "", openLowPrecision(&asked))
	if asked != "fp32" || def.ComputePrecision != "" || def.Decoder.CandidateEmbedding != "" || def.Decoder.Embedding != extraction.DecoderEmbedding {
		t.Fatalf("default run: opened in %q; meta compute_precision %q, candidate_embedding %q, embedding %q", asked, def.ComputePrecision, def.Decoder.CandidateEmbedding, def.Decoder.Embedding)
	}
	// The same rows (the fake GPU is a CPU): within two fp32 evaluations' bound, since gonum's
	// kernels round by the operands' alignment, which differs between the two loads.
	sa, err := store.Open(filepath.Join(tmp, "bf16"))
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := store.Open(filepath.Join(tmp, "fp32"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	tol := fptol.Chain(6*2, 4*64, fptol.Float32)
	for i := 0; i < sa.NumTexts(); i++ {
		n, d := sa.NumTokens(i), sa.D()
		x, y := make([]float32, n*d), make([]float32, n*d)
		if n != sb.NumTokens(i) || sa.Rows(i, 0, n, x) != nil || sb.Rows(i, 0, n, y) != nil {
			t.Fatalf("text %d: %d and %d rows", i, n, sb.NumTokens(i))
		}
		for j := range x {
			if math.Abs(float64(x[j]-y[j])) > tol*math.Max(1, math.Abs(float64(y[j]))) {
				t.Fatalf("text %d value %d: %v with -embedding stored, %v with final", i, j, x[j], y[j])
			}
		}
	}
	cfg, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := decoderExtract{modelDir: dir, point: "attn-input", layer: 1, batch: 64}
	name := func(b runner.Budget) string { return b.String() }
	if s := name(extractBudget(a, cfg, 2, 0, nil, 64)); !strings.Contains(s, "blocks 0..1 of 4") {
		t.Errorf("the pre-flight of blocks 0..1 does not say so:\n%s", s)
	}
}
