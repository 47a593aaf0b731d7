package checkpoints

import (
	"math"
	"slices"
	"testing"
)

func TestF16KnownPatterns(t *testing.T) {
	cases := []struct {
		f16  uint16
		want uint32
		what string
	}{
		{0x0000, 0x00000000, "+0"},
		{0x8000, 0x80000000, "-0"},
		{0x3c00, 0x3f800000, "1"},
		{0xc000, 0xc0000000, "-2"},
		{0x3555, 0x3eaaa000, "0.333251953125"},
		{0x7bff, 0x477fe000, "65504, the largest finite"},
		{0x0400, 0x38800000, "2^-14, the smallest normal"},
		{0x0001, 0x33800000, "2^-24, the smallest subnormal"},
		{0x8001, 0xb3800000, "-2^-24"},
		{0x0002, 0x34000000, "2^-23"},
		{0x0200, 0x38000000, "2^-15, a subnormal"},
		{0x03ff, 0x387fc000, "1023 * 2^-24, the largest subnormal"},
		{0x7c00, 0x7f800000, "+Inf"},
		{0xfc00, 0xff800000, "-Inf"},
		{0x7e00, 0x7fc00000, "quiet NaN"},
		{0x7c01, 0x7f802000, "signalling NaN, payload 1"},
		{0xfe01, 0xffc02000, "negative quiet NaN with payload"},
		{0x7fff, 0x7fffe000, "NaN, all payload bits"},
	}
	for _, c := range cases {
		if got := f16ToF32Bits(c.f16); got != c.want {
			t.Errorf("f16 %#04x (%s): got %#08x, want %#08x", c.f16, c.what, got, c.want)
		}
	}
}

// TestF16AllPatterns checks every binary16 against its value computed from the IEEE 754 definition
// in float64, and NaNs for their payload.
func TestF16AllPatterns(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := math.Float32frombits(f16ToF32Bits(h))
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		exp, mant := int(h>>10)&0x1f, float64(h&0x3ff)
		var want float64
		switch {
		case exp == 0x1f && mant == 0:
			want = math.Inf(int(sign))
		case exp == 0x1f:
			if !math.IsNaN(float64(got)) {
				t.Fatalf("f16 %#04x: got %v, want NaN", h, got)
			}
			if payload := f16ToF32Bits(h) & 0x7fffff; payload != uint32(h&0x3ff)<<13 {
				t.Fatalf("f16 %#04x: NaN payload %#x, want %#x", h, payload, uint32(h&0x3ff)<<13)
			}
			if (f16ToF32Bits(h)>>31 == 1) != (sign < 0) {
				t.Fatalf("f16 %#04x: NaN sign lost", h)
			}
			continue
		case exp == 0:
			want = sign * math.Ldexp(mant, -24)
		default:
			want = sign * math.Ldexp(1+mant/1024, exp-15)
		}
		if float64(got) != want || math.Signbit(float64(got)) != (sign < 0) {
			t.Fatalf("f16 %#04x: got %v, want %v", h, got, want)
		}
	}
}

func TestBF16KnownPatterns(t *testing.T) {
	cases := []struct {
		bf16 uint16
		want float32
		bits uint32
	}{
		{0x3f80, 1, 0x3f800000},
		{0xc049, -3.140625, 0xc0490000},
		{0x8000, float32(math.Copysign(0, -1)), 0x80000000},
		{0x0001, math.Float32frombits(0x00010000), 0x00010000}, // subnormal
		{0x0080, math.Float32frombits(0x00800000), 0x00800000}, // smallest normal
		{0x7f7f, math.Float32frombits(0x7f7f0000), 0x7f7f0000}, // largest finite
		{0x7f80, float32(math.Inf(1)), 0x7f800000},
		{0xff80, float32(math.Inf(-1)), 0xff800000},
		{0x7fc1, math.Float32frombits(0x7fc10000), 0x7fc10000}, // quiet NaN with payload
		{0x7f81, math.Float32frombits(0x7f810000), 0x7f810000}, // signalling NaN
	}
	for _, c := range cases {
		got := bf16ToF32Bits(c.bf16)
		if got != c.bits {
			t.Errorf("bf16 %#04x: got bits %#08x, want %#08x", c.bf16, got, c.bits)
		}
		if g := math.Float32frombits(got); !math.IsNaN(float64(c.want)) && g != c.want {
			t.Errorf("bf16 %#04x: got %v, want %v", c.bf16, g, c.want)
		}
	}
}

// TestLoadAnyConvertsHalfFiles reads a hand-built file mixing F16, BF16 and F32 tensors.
func TestLoadAnyConvertsHalfFiles(t *testing.T) {
	header := `{"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},` +
		`"pad":{"dtype":"F16","shape":[1],"data_offsets":[14,16]},` +
		`"f":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}}`
	data := []byte{
		0x00, 0x3c, 0x01, 0x00, 0x00, 0xfc, 0x01, 0x7c, // h: 1, 2^-24, -Inf, sNaN
		0x80, 0x3f, 0x01, 0x00, 0xc1, 0x7f, // b: 1, subnormal, NaN payload
		0x00, 0x80, // pad: -0
		0x00, 0x00, 0x20, 0x41, // f: 10
	}
	path := writeRaw(t, fileBytes(header, data))
	got, _, err := LoadAny(path)
	if err != nil {
		t.Fatal(err)
	}
	sameTensors(t, got, []Tensor{
		{Name: "h", Shape: []int{2, 2}, Data: []float32{1, f32(0x33800000), f32(0xff800000), f32(0x7f802000)}},
		{Name: "b", Shape: []int{3}, Data: []float32{1, f32(0x00010000), f32(0x7fc10000)}},
		{Name: "pad", Shape: []int{1}, Data: []float32{f32(0x80000000)}},
		{Name: "f", Shape: []int{1}, Data: []float32{10}},
	})
	if _, _, err := Load(path); err == nil {
		t.Fatal("Load accepted F16 tensors")
	}
	// Converted tensors feed CopyInto, the path of pretrained weights into a model.
	dst := map[string][]float32{"h": make([]float32, 4), "b": make([]float32, 3), "pad": {0}, "f": {0}}
	if err := CopyInto(got, []Spec{{"h", []int{2, 2}}, {"b", []int{3}}, {"pad", []int{1}}, {"f", []int{1}}}, dst); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bitsOf(dst["h"]), []uint32{0x3f800000, 0x33800000, 0xff800000, 0x7f802000}) {
		t.Fatalf("dst[h] bits %08x", bitsOf(dst["h"]))
	}
}
