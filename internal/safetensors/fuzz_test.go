package safetensors

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader. It must never panic; what it accepts must tile
// the data section exactly, convert without error when its dtypes are F32, F16 or BF16, and
// survive a write and a second read bit for bit (F32 is written back as F32, and F16 and BF16 as
// themselves, which the widening then narrowing leaves unchanged except NaN, which comes back quiet).
//
//	go test ./internal/safetensors -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	f.Add(fileBytes(`{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(fileBytes(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}}`,
		[]byte{0x00, 0x3c, 0x01, 0x7c, 0x80, 0x3f}))
	f.Add(fileBytes(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}`, make([]byte, 24)))
	f.Add(fileBytes(`{"w":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`, nil))
	f.Add(fileBytes(`{"i":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(fileBytes("{\"w\xff\":{}}", nil))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 1<<62), "{}"...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		covered := 0
		var specs []Spec
		var data [][]float32
		for _, tn := range file.Tensors() {
			n, err := NumElements(tn.Shape)
			if err != nil || n*tn.DType.Size() != len(tn.Bytes()) || n != tn.NumElements() {
				t.Fatalf("tensor %q: shape %v, %s, %d bytes", tn.Name, tn.Shape, tn.DType, len(tn.Bytes()))
			}
			covered += len(tn.Bytes())
			x := make([]float32, n)
			if err := tn.Float32s(x); err != nil {
				if tn.DType.float() {
					t.Fatalf("tensor %q: %v", tn.Name, err)
				}
				return
			}
			specs = append(specs, Spec{tn.Name, tn.DType, tn.Shape})
			data = append(data, x)
		}
		if n := binary.LittleEndian.Uint64(b); uint64(covered) != uint64(len(b))-8-n {
			t.Fatalf("tensors cover %d of %d data bytes", covered, uint64(len(b))-8-n)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, file.Metadata(), specs)
		if err != nil {
			t.Fatalf("accepted file cannot be written back: %v", err)
		}
		for _, x := range data {
			if err := w.WriteTensor(x); err != nil {
				t.Fatal(err)
			}
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("written back file does not parse: %v", err)
		}
		if !maps.Equal(again.Metadata(), file.Metadata()) || len(again.Tensors()) != len(specs) {
			t.Fatal("round trip changed the metadata or the tensor count")
		}
		for i, s := range specs {
			tn, ok := again.Tensor(s.Name)
			if !ok || tn.DType != s.DType || !slices.Equal(tn.Shape, s.Shape) {
				t.Fatalf("tensor %q changed in the round trip", s.Name)
			}
			x := make([]float32, tn.NumElements())
			if err := tn.Float32s(x); err != nil {
				t.Fatal(err)
			}
			for j, v := range x {
				w := data[i][j]
				if math.Float32bits(v) != math.Float32bits(w) && !(s.DType != F32 && v != v && w != w) {
					t.Fatalf("tensor %q element %d: %#08x, was %#08x", s.Name, j, math.Float32bits(v), math.Float32bits(w))
				}
			}
		}
	})
}
