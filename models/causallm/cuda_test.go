package causallm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/cuda/cudatest"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
)

// TestCUDATrainStepMatchesCPU: the decoder's forward and backward on the GPU (embedding, RoPE,
// causal attention and the chunked cross-entropy on lm.cu's kernels, the rest on the backend's
// other kernels and cuBLAS) give the CPU's loss and every parameter's gradient from the same
// weights and batch: to 1e-4 relative in fp32, to the bf16 GEMM tolerance in bf16. The batch
// spans two cross-entropy chunks; the forward-only loss (evaluation) is the training loss.
func TestCUDATrainStepMatchesCPU(t *testing.T) {
	for _, prec := range []string{cuda.PrecisionFP32, cuda.PrecisionBF16} {
		t.Run(prec, func(t *testing.T) {
			gpu := cudatest.Open(t, prec)
			if err := CheckBackend(gpu); err != nil {
				t.Fatalf("the CUDA backend lacks the language model's kernels: %v", err)
			}
			tol := 1e-4
			if prec == cuda.PrecisionBF16 {
				tol = 6e-2 // bf16 GEMM operands keep 8 significant bits
			}
			cpuBe, err := cpu.New(cpu.Config{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer cpuBe.Close()
			cfg := lmcfg.Model{Hidden: 64, Layers: 2, Heads: 4, MLP: 96, Seq: 40, RopeTheta: 10000, Eps: 1e-5}
			const V = 300
			B := engine.CrossEntropyChunk/cfg.Seq + 1 // B*Seq tokens: two chunks of the cross-entropy
			ref, err := New(cpuBe, cfg, V, 5)
			if err != nil {
				t.Fatal(err)
			}
			dut, err := New(gpu, cfg, V, 5)
			if err != nil {
				t.Fatal(err)
			}
			w := ref.Params().Data().ToHost()
			r := rand.New(rand.NewPCG(8, 8))
			for i := range w {
				w[i] += float32(r.NormFloat64() * 0.05)
			}
			for _, m := range []*Model{ref, dut} {
				if err := m.Params().Data().CopyFrom(w); err != nil {
					t.Fatal(err)
				}
				m.Params().ZeroGrad()
			}
			win := randomWindows(r, B, cfg.Seq, V)
			lr, err := ref.ForwardBackward(win, B)
			if err != nil {
				t.Fatal(err)
			}
			ld, err := dut.ForwardBackward(win, B)
			if err != nil {
				t.Fatal(err)
			}
			if e := math.Abs(ld-lr) / lr; e > tol {
				t.Errorf("loss %v on the GPU, %v on the CPU (relative %.2g > %g)", ld, lr, e, tol)
			}
			gr, gd := ref.Params().Grad().ToHost(), dut.Params().Grad().ToHost()
			for _, v := range ref.Params().Views() {
				a, b := gd[v.Offset:v.Offset+v.Tensor.Size()], gr[v.Offset:v.Offset+v.Tensor.Size()]
				if e := cudatest.RelL2(a, b); e > tol || math.IsNaN(e) {
					t.Errorf("%s: gradient relative L2 error %.2g > %g", v.Name, e, tol)
				}
			}
			le, err := dut.Loss(win, B)
			if err != nil {
				t.Fatal(err)
			}
			if le != ld {
				t.Errorf("forward-only loss %v, training loss %v on the GPU", le, ld)
			}
		})
	}
}
