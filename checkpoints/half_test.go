package checkpoints

import (
	"slices"
	"testing"
)

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
