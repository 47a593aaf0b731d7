package causallm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// withoutKernel is a backend that lacks one fused kernel (a CUDA backend whose lm.ptx predates it).
type withoutKernel struct {
	engine.Backend
	hide string
}

func (w withoutKernel) Kernel(name string) any {
	if name == w.hide {
		return nil
	}
	return w.Backend.Kernel(name)
}

func (w withoutKernel) Unwrap() engine.Backend { return w.Backend }

// CheckInference accepts the CPU and refuses a backend without RoPE or SpanAttention, naming the
// kernel; NewDecoder refuses such a backend with the same error.
func TestCheckInference(t *testing.T) {
	cpuBe := newCPU(t, 1)
	if err := causallm.CheckInference(cpuBe); err != nil {
		t.Fatalf("CPU: %v", err)
	}
	w, err := llama.Random(decoderFamilies()["llama2"], 1, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{engine.KernelRoPE, engine.KernelSpanAttention} {
		be := withoutKernel{cpuBe, k}
		err := causallm.CheckInference(be)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no kernel %q", k)) {
			t.Errorf("without %s: %v, want an error naming the kernel", k, err)
		}
		if _, derr := causallm.NewDecoder(be, w); derr == nil || err == nil || derr.Error() != err.Error() {
			t.Errorf("NewDecoder without %s: %v, want %v", k, derr, err)
		}
	}
	// The training model's kernels are not the decoder's: a backend without the cross-entropy
	// still runs inference.
	if err := causallm.CheckInference(withoutKernel{cpuBe, engine.KernelCrossEntropy}); err != nil {
		t.Errorf("without the cross-entropy: %v", err)
	}
}
