package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// TestSpans: the fresh ranges of a weight copy merge what AdamW refreshes (two runs of a
// parameter buffer become one range) and cover a GEMM operand only when one range holds all of
// it.
func TestSpans(t *testing.T) {
	var s spans
	s = s.add(10, 20)
	s = s.add(0, 5)
	if !slices.Equal(s, spans{{0, 5}, {10, 20}}) || s.covers(4, 11) || !s.covers(10, 20) || !s.covers(0, 1) || s.covers(19, 21) {
		t.Fatalf("spans %v", s)
	}
	s = s.add(5, 10) // adjacent on both sides: one range
	if !slices.Equal(s, spans{{0, 20}}) || !s.covers(0, 20) {
		t.Fatalf("after filling the gap: %v", s)
	}
	s = s.add(30, 30) // empty: nothing
	s = s.add(25, 40).add(15, 26)
	if !slices.Equal(s, spans{{0, 40}}) {
		t.Fatalf("after overlapping adds: %v", s)
	}
	if (spans)(nil).covers(0, 1) {
		t.Fatal("an empty list covers something")
	}
}

// TestAdamWBF16Emulated runs adamw.cu's ga_adamw and adamw16.cu's ga_adamw_bf16 on the CPU under
// testdata/cuda_emu.h on the same inputs: the two update p, m, v and g bit for bit alike (they
// share adamw.cuh), and the bf16 copy is the updated p rounded to nearest even, the bits
// ga_to_bf16 gives a bf16 GEMM from the fp32 weights (numfmt.F32ToBF16; NaN as NaN). So a GEMM
// reading the copy multiplies what it multiplied before. Skipped without g++ (C++20).
func TestAdamWBF16Emulated(t *testing.T) {
	bin := buildEmulated(t, "ga_adamw_bf16", "adamw16_emu", "kernels/adamw.cu", "kernels/adamw16.cu", "kernels/adamw.cuh", "kernels/common.cuh")
	r := rand.New(rand.NewPCG(41, 16))
	const n = 1001
	in := make([][]float32, 4) // p, g, m, v
	for k := range in {
		in[k] = make([]float32, n)
		for i := range in[k] {
			in[k][i] = float32(r.NormFloat64())
		}
	}
	for i := range n {
		in[3][i] = float32(math.Abs(float64(in[3][i]))) // v >= 0
	}
	in[0][0], in[0][1], in[0][2] = float32(math.NaN()), float32(math.Inf(1)), 0x1.01p0 // a NaN, an infinity, a tie
	in[1][2] = 0
	var stdin bytes.Buffer
	binary.Write(&stdin, binary.LittleEndian, int32(n))
	binary.Write(&stdin, binary.LittleEndian, []float32{1e-3, 0.9, 0.95, 1e-8, 0.01, 1 - 0.9*0.9, 1 - 0.95*0.95})
	for _, x := range in {
		binary.Write(&stdin, binary.LittleEndian, x)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("adamw16_emu: %v", err)
	}
	if len(out) != 8*4*n+2*n {
		t.Fatalf("adamw16_emu wrote %d bytes, want %d", len(out), 8*4*n+2*n)
	}
	rd := bytes.NewReader(out)
	res := make([][]float32, 8)
	for k := range res {
		res[k] = make([]float32, n)
		binary.Read(rd, binary.LittleEndian, res[k])
	}
	p16 := make([]uint16, n)
	binary.Read(rd, binary.LittleEndian, p16)
	changed := 0
	for k, name := range []string{"p", "g", "m", "v"} {
		for i := range n {
			a, b := res[k][i], res[4+k][i]
			if math.Float32bits(a) != math.Float32bits(b) && !(math.IsNaN(float64(a)) && math.IsNaN(float64(b))) {
				t.Fatalf("%s[%d]: ga_adamw %g, ga_adamw_bf16 %g", name, i, a, b)
			}
		}
	}
	for i, p := range res[4] {
		if p != in[0][i] {
			changed++
		}
		want := numfmt.F32ToBF16(p)
		if p16[i] != want && !(math.IsNaN(float64(p)) && p16[i]&0x7fff > 0x7f80) {
			t.Fatalf("p16[%d] = %#04x for p %g (%#08x), want %#04x", i, p16[i], p, math.Float32bits(p), want)
		}
		if res[5][i] != 0 {
			t.Fatalf("g[%d] = %g after the step, want 0", i, res[5][i])
		}
	}
	if changed < n/2 {
		t.Fatalf("only %d of %d weights changed: the step did not run", changed, n)
	}
}
