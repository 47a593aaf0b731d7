package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestSpanKernelEmulated runs lm.cu's ga_span_attention on the CPU under
// testdata/cuda_emu.h (a thread per CUDA thread, barriers for
// __syncthreads and the warp shuffles) against the CPU backend's kernel, on
// the crosscheck's cases, within the crosscheck's fp32 tolerance: the
// kernel's indexing, warp split, online softmax and merge are checked where
// no GPU and no nvcc are. It says nothing of CUDA's memory model or speed
// (TestBackendCrossCheck* does, on a GPU). Skipped without g++ (C++20).
func TestSpanKernelEmulated(t *testing.T) {
	bin := buildEmulated(t, "ga_span_attention", "span_emu", "kernels/lm.cu", "kernels/common.cuh")
	ref := newCPU(t, cpu.Config{Workers: 1})
	defer ref.Close()
	rng := rand.New(rand.NewPCG(11, 5))
	// The crosscheck's small cases and a few more: every emulated
	// barrier is a futex wait of 64 or 256 OS threads, about 10 ms per key
	// a warp visits here, so the long ones are left to the GPU.
	cases := append(slices.Clone(spanCases[:4]), spanCase{1, 1, 0, 2, 1, 4, "next"}, spanCase{5, 17, 17, 3, 3, 100, "next"},
		spanCase{2, 9, 9, 2, 1, 256, "alternatives"}, spanCase{1, 40, 40, 1, 1, 32, "next"}, spanCase{4, 11, 5, 4, 2, 36, "segments"})
	for i, c := range cases {
		// The GPU's GA_BLOCK = 256 threads for the first case; 64 (two
		// warps, so the merge still runs) for the others.
		threads := 64
		if i == 0 {
			threads = gaBlock
		}
		start := time.Now()
		qw, kw := c.heads*c.hd, c.kvHeads*c.hd
		in := spanInputs(rng, c)
		var stdin bytes.Buffer
		for _, d := range []int{c.N, c.P, c.cached, c.heads, c.kvHeads, c.hd, threads} {
			binary.Write(&stdin, binary.LittleEndian, int32(d))
		}
		for _, x := range [][]float32{in.q, in.k, in.v, in.kc, in.vc, in.spans} {
			binary.Write(&stdin, binary.LittleEndian, x)
		}
		cmd := exec.Command(bin)
		cmd.Stdin = &stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%+v: span_emu: %v", c, err)
		}
		got := make([]float32, c.N*qw)
		if len(out) != 4*len(got) {
			t.Fatalf("%+v: span_emu wrote %d bytes, want %d", c, len(out), 4*len(got))
		}
		binary.Read(bytes.NewReader(out), binary.LittleEndian, got)

		tp := engine.NewTape(ref)
		var kc, vc *engine.Tensor
		if c.cached > 0 {
			kc, vc = tp.Input(in.kc, c.P, kw), tp.Input(in.vc, c.P, kw)
		}
		want := tp.Input(make([]float32, c.N*qw), c.N, qw)
		fused[engine.SpanAttentionKernel](ref, engine.KernelSpanAttention)(want, tp.Input(in.q, c.N, qw), tp.Input(in.k, c.N, kw),
			tp.Input(in.v, c.N, kw), kc, vc, tp.Input(in.spans, c.N, 3), c.heads, c.kvHeads)
		for i, x := range got {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%+v: emulated o[%d] = %g", c, i, x)
			}
		}
		used, msg := compareValues(got, want.ToHost(), nil, fp32Tol.Elem)
		if msg != "" {
			t.Fatalf("%+v: emulated kernel against the CPU: %s", c, msg)
		}
		t.Logf("%s N=%d P=%d cached=%d heads=%d kv=%d hd=%d, %d threads: %.3g of the bound (%v)", c.mode, c.N, c.P, c.cached, c.heads, c.kvHeads, c.hd, threads, used, time.Since(start).Round(time.Millisecond))
	}
}
