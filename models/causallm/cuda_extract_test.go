package causallm_test

// Extraction in tf32 and bf16 on the GPU (`store extract -precision`): each precision's rows
// against the fp32 rows within the recomputation bound of a deployer of that precision
// (fptol.Recompute), and detectably off them (the precision took effect), with each precision's
// tokens/s. Skips without a GPU; scripts/gpu-bundle.sh runs it (models/causallm:CUDA).

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// recomputeAs is the deployer precision whose fptol.Recompute bound covers rows computed with
// GEMMs in prec (data/store's Meta.RecomputePrecision): tf32 keeps fp16's 10 mantissa bits and
// rounds only GEMM inputs, fewer roundings than the fp16 deployer the bound assumes.
func recomputeAs(prec string) string {
	switch prec {
	case cuda.PrecisionTF32:
		return fptol.PrecisionFP16
	case cuda.PrecisionBF16:
		return fptol.PrecisionBF16
	}
	return fptol.PrecisionFP32
}

// precisionAgreement compares rows computed with GEMMs in prec with the fp32 rows of the same
// texts, row by row (relative 2-norm, the metric of fptol.Recompute), after blocks blocks of width
// d: the worst row must lie within Recompute(recomputeAs(prec)), and, for tf32 and bf16, beyond
// Recompute(fp32), which two fp32 evaluations stay within (else the precision was not applied).
// It returns the worst row's error and what is wrong ("" when nothing).
func precisionAgreement(prec string, low, fp32 []float32, blocks, d int) (float64, string) {
	hi, err := fptol.Recompute(recomputeAs(prec), blocks, d)
	if err != nil {
		return 0, err.Error()
	}
	lo, _ := fptol.Recompute(fptol.PrecisionFP32, blocks, d)
	worst := 0.0
	for r := 0; r+d <= len(fp32) && r+d <= len(low); r += d {
		var num, den float64
		for j := r; j < r+d; j++ {
			e := float64(low[j]) - float64(fp32[j])
			num += e * e
			den += float64(fp32[j]) * float64(fp32[j])
		}
		worst = math.Max(worst, math.Sqrt(num/math.Max(den, 1e-300)))
	}
	switch {
	case len(low) != len(fp32):
		return worst, fmt.Sprintf("%d values, fp32 %d", len(low), len(fp32))
	case !(worst <= hi):
		return worst, fmt.Sprintf("%s rows %.3g off the fp32 rows, past the %s deployer's bound %.3g", prec, worst, recomputeAs(prec), hi)
	case prec != cuda.PrecisionFP32 && !(worst > lo):
		return worst, fmt.Sprintf("%s rows only %.3g off the fp32 rows, within fp32's own bound %.3g: the precision was not applied", prec, worst, lo)
	}
	return worst, ""
}

// The agreement check itself, on the CPU: rows perturbed as a bf16 GEMM would (2^-9 relative)
// pass it; the fp32 rows themselves fail it for bf16 (not applied); rows 5% off fail it for tf32.
func TestPrecisionAgreementCatchesWhatItMust(t *testing.T) {
	const d, rows = 256, 8
	rng := rand.New(rand.NewPCG(3, 4))
	ref, near, far := make([]float32, d*rows), make([]float32, d*rows), make([]float32, d*rows)
	for i := range ref {
		ref[i] = float32(rng.NormFloat64())
		near[i] = ref[i] * float32(1+0x1p-9*rng.NormFloat64())
		far[i] = ref[i] * float32(1+0.05*rng.NormFloat64())
	}
	if e, bad := precisionAgreement(cuda.PrecisionBF16, near, ref, 1, d); bad != "" {
		t.Errorf("bf16-like rows (%.3g off): %s", e, bad)
	}
	if _, bad := precisionAgreement(cuda.PrecisionBF16, ref, ref, 1, d); bad == "" {
		t.Error("fp32 rows pass for bf16: a precision silently ignored would pass")
	}
	if _, bad := precisionAgreement(cuda.PrecisionTF32, far, ref, 1, d); bad == "" {
		t.Error("rows 5% off pass for tf32")
	}
}

// TestCUDADecoderExtractPrecisions: at BenchmarkDecoderExtractLlama2Shape's shape (Llama-2-7B cut
// to 2 blocks, vocabulary 1024), Forward of 16 texts x 128 tokens in fp32, tf32 and bf16 GEMMs
// (one backend each): the residual rows of block 1 and the attention inputs of block 1 (what
// `store extract -layer 1` stores) in tf32 and bf16 agree with the fp32 rows within
// precisionAgreement, and each precision's tokens/s is logged with the 10-block figure it implies
// (`store extract -embedding stored -layer 10` runs 10 blocks).
func TestCUDADecoderExtractPrecisions(t *testing.T) {
	c := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 1024, Hidden: 4096, Intermediate: 11008, Layers: 2,
		Heads: 32, KVHeads: 32, HeadDim: 128, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 4096}
	probe := cudatest.Open(t, cuda.PrecisionFP32) // skips without a GPU before the weights are drawn
	if err := causallm.CheckInference(probe); err != nil {
		t.Fatalf("%v: the GPU check needs a lm.ptx with ga_span_attention (GELOATTACK_CUDA_PTX=<folder of rebuilt PTX>)", err)
	}
	m, err := llama.Random(c, 1, 0.02, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const textLen, texts, reps = 128, 16, 3
	seqs := randomSeqs(texts, textLen, c.VocabSize)
	n, d := textLen*texts, c.Hidden
	rows := map[string][2][]float32{} // precision -> residual 1, attn-input 1
	ctx := context.Background()
	for _, prec := range []string{cuda.PrecisionFP32, cuda.PrecisionTF32, cuda.PrecisionBF16} {
		gpu := cudatest.Open(t, prec)
		dc, err := causallm.NewDecoder(gpu, m)
		if err != nil {
			t.Fatal(err)
		}
		// Declared as extraction declares its point: the other blocks' rows stay on the GPU.
		restore := dc.TapOnly(causallm.TapPoint{Point: llama.Residual, Layer: 1}, causallm.TapPoint{Point: llama.AttnInput, Layer: 1})
		res, attn := make([]float32, n*d), make([]float32, n*d)
		tap := func(p llama.Point, layer int, x []float32) error {
			switch {
			case p == llama.Residual && layer == 1:
				copy(res, x)
			case p == llama.AttnInput && layer == 1:
				copy(attn, x)
			}
			return nil
		}
		times := make([]float64, 0, reps)
		for i := range reps + 1 {
			start := time.Now()
			if err := dc.Forward(ctx, seqs, tap, nil); err != nil {
				t.Fatalf("%s: %v", prec, err)
			}
			if i > 0 { // the first pass warms the kernels and the tape's arena
				times = append(times, time.Since(start).Seconds())
			}
		}
		sort.Float64s(times)
		perSec := float64(n) / times[len(times)/2]
		t.Logf("extraction %s: Forward of %d texts x %d tokens through %d blocks: median %.1f ms, %.0f tokens/s; through 10 blocks about %.0f tokens/s (target 20,000 on an H100)",
			prec, texts, textLen, c.Layers, 1e3*times[len(times)/2], perSec, perSec*float64(c.Layers)/10)
		restore()
		rows[prec] = [2][]float32{res, attn}
		if err := dc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ref := rows[cuda.PrecisionFP32]
	for _, prec := range []string{cuda.PrecisionTF32, cuda.PrecisionBF16} {
		for i, what := range []string{"residual 1", "attn-input 1"} {
			e, bad := precisionAgreement(prec, rows[prec][i], ref[i], 1, d)
			hi, _ := fptol.Recompute(recomputeAs(prec), 1, d)
			t.Logf("%s %s: worst row %.3g off the fp32 rows (bound %.3g)", prec, what, e, hi)
			if bad != "" {
				t.Errorf("%s: %s", what, bad)
			}
		}
	}
}
