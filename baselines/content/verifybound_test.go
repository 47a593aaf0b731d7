package content

import (
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/store"
)

// VerifyBound, known answers: for decoder and encoder stores, float32 and float16 rows, it is the
// recomputation bound of a deployer of meta.json's compute_precision (absent and fp32: fp32, tf32:
// fp16, bf16: bf16) through the embedder's layer at its width, widened by the store's float16
// rounding, so it grows fp32 < tf32 < bf16; a compute_precision it has no bound for (fp16, fp8,
// a spelling in capitals) is refused naming the field, not read as fp32.
func TestVerifyBoundFollowsComputePrecision(t *testing.T) {
	encMeta := func(dtype string) store.Meta {
		return store.Meta{D: 8, E: 8, Layer: 2, DType: dtype, Norm: store.NormRaw, SpecialTokens: store.SpecialKept, MaxTokens: 16}
	}
	for name, emb := range map[string]*Embedder{
		"decoder float32": testDecoder(t, decoderMeta(store.Float32, false)),
		"decoder float16": testDecoder(t, decoderMeta(store.Float16, false)),
		"encoder float16": testEncoder(t, encMeta(store.Float16)),
		"encoder float32": testEncoder(t, encMeta(store.Float32)),
	} {
		meta := decoderMeta(store.Float32, false) // VerifyBound reads only compute_precision
		prev := 0.0
		for _, c := range []struct{ prec, deployer string }{{"", "fp32"}, {"fp32", "fp32"}, {"tf32", "fp16"}, {"bf16", "bf16"}} {
			meta.ComputePrecision = c.prec
			got, err := emb.VerifyBound(meta)
			if err != nil {
				t.Fatalf("%s, compute_precision %q: %v", name, c.prec, err)
			}
			comp, err := membership.RecomputeError(c.deployer, emb.Layer(), emb.D())
			if err != nil {
				t.Fatal(err)
			}
			want := membership.StoredRecompute(comp, emb.StoreRoundoff())
			if got.Rho != want || got.Precision != c.deployer || got.Blocks != emb.Layer() || got.Width != emb.D() {
				t.Errorf("%s, compute_precision %q: %+v; want rho %.3g of a %s deployer through %d blocks of width %d",
					name, c.prec, got, want, c.deployer, emb.Layer(), emb.D())
			}
			if (got.StoreRoundoff > 0) != strings.HasSuffix(name, "float16") {
				t.Errorf("%s: store round-off %v", name, got.StoreRoundoff)
			}
			if c.prec != "fp32" && !(got.Rho > prev) {
				t.Errorf("%s, compute_precision %q: rho %.3g not above the finer precision's %.3g", name, c.prec, got.Rho, prev)
			}
			prev = got.Rho
		}
		for _, bad := range []string{"fp16", "fp8", "FP32", "bfloat16"} {
			meta.ComputePrecision = bad
			if got, err := emb.VerifyBound(meta); err == nil || !strings.Contains(err.Error(), "compute_precision \""+bad+"\"") {
				t.Errorf("%s, compute_precision %q: %+v, %v; want a refusal naming the field", name, bad, got, err)
			}
		}
	}
}
