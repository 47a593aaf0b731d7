package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// roundObserveInputs are float32 bit patterns covering every rounding case of bf16 and fp16:
// each format's ties (odd and even), overflow thresholds, subnormals, zeros, infinities, NaNs, and
// random bits.
func roundObserveInputs() []float32 {
	var bits []uint32
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001,
		0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x477fffff, 0x47800000, 0x7f7fffff, // fp16 overflow
		0x38800000, 0x387fffff, 0x33800000, 0x33000000, 0x33000001, 0x337fffff, 0x32ffffff, 0x00000001, // fp16 subnormals
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0x7f7f8000, 0x7f7f7fff, // bf16 ties and overflow
		0x3f801000, 0x3f803000, 0x3f801001, 0x3f800fff} { // fp16 ties
		bits = append(bits, b, b|0x80000000)
	}
	r := rand.New(rand.NewPCG(41, 7))
	for range 20000 {
		bits = append(bits, r.Uint32())
	}
	for range 20000 { // magnitudes where fp16 is neither zero nor infinite
		e := uint32(100 + r.IntN(50))
		bits = append(bits, r.Uint32()&0x807fffff|e<<23)
	}
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = math.Float32frombits(b)
	}
	return out
}

// TestRoundObserveEmulated runs mix.cu's ga_round_observe on the CPU under testdata/cuda_emu.h
// against internal/numfmt, which the sampler rounds host-formed U with: bit for bit, NaNs as
// NaNs. So device mixing with observe_dtype bf16 or fp16 rounds as host mixing does once nvcc has
// built mix.ptx. Skipped without g++ (C++20).
func TestRoundObserveEmulated(t *testing.T) {
	bin := buildEmulated(t, "ga_round_observe", "mix_emu", "kernels/mix.cu", "kernels/common.cuh")
	in := roundObserveInputs()
	for _, c := range []struct {
		round engine.MixRound
		ref   func(float32) float32
	}{{engine.MixRoundBF16, numfmt.RoundBF16}, {engine.MixRoundFP16, numfmt.RoundF16}} {
		var stdin bytes.Buffer
		binary.Write(&stdin, binary.LittleEndian, [2]int32{int32(c.round), int32(len(in))})
		binary.Write(&stdin, binary.LittleEndian, in)
		cmd := exec.Command(bin)
		cmd.Stdin = &stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: mix_emu: %v", c.round, err)
		}
		got := make([]float32, len(in))
		if len(out) != 4*len(got) {
			t.Fatalf("%v: mix_emu wrote %d bytes, want %d", c.round, len(out), 4*len(got))
		}
		binary.Read(bytes.NewReader(out), binary.LittleEndian, got)
		for i, x := range in {
			want := c.ref(x)
			if math.IsNaN(float64(want)) != math.IsNaN(float64(got[i])) ||
				!math.IsNaN(float64(want)) && math.Float32bits(want) != math.Float32bits(got[i]) {
				t.Fatalf("%v: %#08x (%g) rounds to %#08x (%g), numfmt %#08x (%g)", c.round, math.Float32bits(x), x,
					math.Float32bits(got[i]), got[i], math.Float32bits(want), want)
			}
		}
	}
}
