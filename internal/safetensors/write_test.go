package safetensors

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// The writer's bytes, known by hand: header keys sorted, entry keys in the reference order,
// padding to 8 bytes, tensors in the order given, each dtype's little-endian encoding.
func TestWriterKnownAnswer(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, map[string]string{"format": "pt"}, []Spec{
		{"z", F32, []int{2}}, {"a", BF16, []int{}}, {"m", F16, []int{0, 3}}, {"h", F16, []int{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range [][]float32{{1, float32(math.Copysign(0, -1))}, {-3.14159265}, {}, {65520, 0.1}} {
		if err := w.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	header := `{"__metadata__":{"format":"pt"},` +
		`"a":{"dtype":"BF16","shape":[],"data_offsets":[8,10]},` +
		`"h":{"dtype":"F16","shape":[2],"data_offsets":[10,14]},` +
		`"m":{"dtype":"F16","shape":[0,3],"data_offsets":[10,10]},` +
		`"z":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	want := fileBytes(header, []byte{
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x80, // z: 1, -0
		0x49, 0xc0, // a: -3.140625
		0x00, 0x7c, 0x66, 0x2e, // h: +Inf (65520 overflows), 0.1 as 0x2e66
	})
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("wrote\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

// What the writer writes, the reader returns: F32 bit for bit (NaN payloads too), F16 and BF16
// as numfmt rounds them.
func TestWriteReadRoundTrip(t *testing.T) {
	x := []float32{0, 1, -2.5, 1e-30, 65504, 70000, math.Float32frombits(0x7fa00001), math.Float32frombits(0x00000001), 0.1, -1e38}
	for _, dt := range []DType{F32, F16, BF16} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, nil, []Spec{{"x", dt, []int{2, 5}}, {"s", dt, nil}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensor([]float32{7}); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		tn, _ := f.Tensor("x")
		if !slices.Equal(tn.Shape, []int{2, 5}) || tn.DType != dt {
			t.Fatalf("%s: %+v", dt, tn.Info)
		}
		got := make([]float32, 10)
		if err := tn.Float32s(got); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			want := v
			switch dt {
			case F16:
				want = numfmt.RoundF16(v)
			case BF16:
				want = numfmt.RoundBF16(v)
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Errorf("%s element %d: %#08x, want %#08x", dt, i, math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
		if s, ok := f.Tensor("s"); !ok || s.Shape == nil || len(s.Shape) != 0 {
			t.Fatalf("%s: scalar %+v", dt, s.Info)
		}
	}
}

// A tensor larger than the encoding buffer is written in parts.
func TestWriteLargeTensor(t *testing.T) {
	x := make([]float32, 100_003)
	for i := range x {
		x[i] = float32(i)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil, []Spec{{"x", F32, []int{len(x)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor(x); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := f.Tensor("x")
	got := make([]float32, len(x))
	if err := tn.Float32s(got); err != nil || !slices.Equal(got, x) {
		t.Fatalf("round trip differs: %v", err)
	}
}

// Invalid specs and metadata are refused before a byte is written; data of the wrong length,
// tensors beyond the specs and tensors never written are errors naming the tensor.
func TestWriterRefuses(t *testing.T) {
	ok := Spec{"a", F32, []int{1}}
	for _, c := range []struct {
		name  string
		specs []Spec
		meta  map[string]string
		want  string
	}{
		{"empty name", []Spec{{"", F32, []int{1}}}, nil, "empty name"},
		{"reserved name", []Spec{{MetadataKey, F32, []int{1}}}, nil, "reserved"},
		{"non-UTF-8 name", []Spec{{"a\xff", F32, []int{1}}}, nil, "not valid UTF-8"},
		{"duplicate", []Spec{ok, ok}, nil, `tensor "a" appears twice`},
		{"negative dimension", []Spec{{"a", F32, []int{-1}}}, nil, "negative dimension"},
		{"overflow", []Spec{{"a", F32, []int{math.MaxInt, 2}}}, nil, "more elements than an int"},
		{"byte overflow", []Spec{{"a", F32, []int{math.MaxInt / 2}}}, nil, "more bytes than an int"},
		{"integer dtype", []Spec{{"a", "I32", []int{1}}}, nil, "the writer stores F32, F16 or BF16"},
		{"non-UTF-8 metadata key", []Spec{ok}, map[string]string{"\xfe": "x"}, "metadata key"},
		{"non-UTF-8 metadata value", []Spec{ok}, map[string]string{"k": "\xfe"}, `metadata "k"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := NewWriter(&buf, c.meta, c.specs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if buf.Len() != 0 {
				t.Fatalf("%d bytes written before the refusal", buf.Len())
			}
		})
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil, []Spec{{"a", F16, []int{2, 3}}, {"b", F32, []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor(make([]float32, 5)); err == nil || !strings.Contains(err.Error(), `tensor "a": shape [2 3] has 6 elements but data has 5`) {
		t.Fatalf("short data: %v", err)
	}
	if err := w.WriteTensor(make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), `tensor "b" and 0 after it not written`) {
		t.Fatalf("Close with a tensor left: %v", err)
	}
	if err := w.WriteTensor([]float32{1}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor([]float32{1}); err == nil {
		t.Fatal("a tensor beyond the specs was written")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

// Errors of the underlying writer come back naming the tensor being written.
func TestWriterPassesWriteErrors(t *testing.T) {
	if _, err := NewWriter(&failWriter{}, nil, nil); err == nil {
		t.Fatal("header write error lost")
	}
	w, err := NewWriter(&failWriter{n: 2}, nil, []Spec{{"a", F32, []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor([]float32{1}); err == nil || !strings.Contains(err.Error(), `tensor "a": disk full`) {
		t.Fatalf("data write error: %v", err)
	}
}

// EncodeHeader is what NewWriter writes, before padding; it refuses what JSON would merge.
func TestEncodeHeader(t *testing.T) {
	table, err := Layout([]Spec{{"b", F32, []int{2}}, {"a", BF16, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if table[1].Begin != 8 || table[1].End != 10 {
		t.Fatalf("layout %+v", table)
	}
	h, err := EncodeHeader(nil, table)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"dtype":"BF16","shape":[],"data_offsets":[8,10]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	if string(h) != want {
		t.Fatalf("header %s, want %s", h, want)
	}
	if len(Pad(h))%8 != 0 || !bytes.HasPrefix(Pad(h), h) {
		t.Fatal("padding")
	}
	if _, err := EncodeHeader(nil, []Info{table[0], table[0]}); err == nil {
		t.Fatal("a duplicate name encoded")
	}
	if _, err := EncodeHeader(nil, []Info{{Name: "x", DType: F32, Begin: 4, End: 0}}); err == nil {
		t.Fatal("reversed offsets encoded")
	}
}
