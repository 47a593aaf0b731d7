package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fileBytes is a safetensors file with header (unpadded, as given) and data.
func fileBytes(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func bitsOf(x []float32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = math.Float32bits(v)
	}
	return out
}

// TestParseKnownFile reads a hand-built file mixing dtypes, out of name order, with a scalar, an
// empty tensor, metadata and foreign formatting, and converts each tensor bit for bit.
func TestParseKnownFile(t *testing.T) {
	header := `{ "h" : {"shape": [2, 2], "data_offsets": [0, 8], "dtype": "F16"},
		"b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},
		"e":{"dtype":"F32","shape":[0,5],"data_offsets":[14,14]},
		"i":{"dtype":"I16","shape":[],"data_offsets":[14,16]},
		"f":{"dtype":"F32","shape":[],"data_offsets":[16,20]},
		"__metadata__": {"format": "pt", "config": "{\"h\": 8}"} }  `
	data := []byte{
		0x00, 0x3c, 0x01, 0x00, 0x00, 0xfc, 0x01, 0x7c, // h: 1, 2^-24, -Inf, signalling NaN
		0x80, 0x3f, 0x01, 0x00, 0xc1, 0x7f, // b: 1, a subnormal, NaN with payload
		0x07, 0x00, // i: 7
		0x00, 0x00, 0x20, 0x41, // f: 10
	}
	f, err := Parse(fileBytes(header, data))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range f.Tensors() {
		names = append(names, tn.Name)
	}
	if want := []string{"h", "b", "e", "i", "f"}; !slices.Equal(names, want) {
		t.Fatalf("data order %v, want %v", names, want)
	}
	if m := f.Metadata(); len(m) != 2 || m["format"] != "pt" || m["config"] != `{"h": 8}` {
		t.Fatalf("metadata %v", m)
	}
	for name, want := range map[string][]uint32{
		"h": {0x3f800000, 0x33800000, 0xff800000, 0x7f802000},
		"b": {0x3f800000, 0x00010000, 0x7fc10000},
		"e": {},
		"f": {0x41200000},
	} {
		tn, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("tensor %q missing", name)
		}
		got := make([]float32, tn.NumElements())
		if err := tn.Float32s(got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bitsOf(got), want) {
			t.Errorf("%s: bits %08x, want %08x", name, bitsOf(got), want)
		}
	}
	i16, _ := f.Tensor("i")
	if !bytes.Equal(i16.Bytes(), []byte{7, 0}) || i16.NumElements() != 1 {
		t.Fatalf("I16 scalar: %v", i16.Bytes())
	}
	if err := i16.Float32s(make([]float32, 1)); err == nil || !strings.Contains(err.Error(), `tensor "i": dtype I16: want F32, F16 or BF16`) {
		t.Fatalf("I16 converted: %v", err)
	}
	h, _ := f.Tensor("h")
	row := make([]float32, 2)
	if err := h.Float32sAt(2, row); err != nil || !slices.Equal(bitsOf(row), []uint32{0xff800000, 0x7f802000}) {
		t.Fatalf("second row: %08x, %v", bitsOf(row), err)
	}
	for _, c := range []struct{ first, n int }{{3, 2}, {-1, 1}, {5, 0}} {
		if err := h.Float32sAt(c.first, make([]float32, c.n)); err == nil {
			t.Errorf("elements %d..+%d of 4 converted", c.first, c.n)
		}
	}
	if err := h.Float32s(make([]float32, 3)); err == nil {
		t.Error("short destination accepted")
	}
	if !bytes.HasPrefix(f.Header(), []byte(`{ "h"`)) || len(f.Header()) != len(header) {
		t.Fatalf("header %q", f.Header())
	}
}

// TestParseRejectsHostileFiles: every fault is an error naming what is wrong, never a panic.
func TestParseRejectsHostileFiles(t *testing.T) {
	hdr := func(s string) []byte { return fileBytes(s, nil) }
	with := fileBytes
	lenOnly := func(n uint64, rest string) []byte { return append(binary.LittleEndian.AppendUint64(nil, n), rest...) }
	d24 := make([]byte, 24)
	const w4 = `"dtype":"F32","shape":[1],"data_offsets":[0,4]`
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "file is 0 bytes, shorter than the 8-byte header length"},
		{"seven bytes", []byte{1, 2, 3, 4, 5, 6, 7}, "shorter than the 8-byte header length"},
		{"header length 2^62", lenOnly(1<<62, "{}"), "header length 4611686018427387904 exceeds the 2 bytes"},
		{"header length max uint64", lenOnly(math.MaxUint64, "{}"), "exceeds"},
		{"non-UTF-8 header", hdr("{\"w\xff\":{}}"), "not valid UTF-8 (byte 3"},
		{"header not an object", hdr(`[1,2]`), "does not start with '{'"},
		{"leading space", hdr(` {}`), "does not start with '{'"},
		{"empty header", lenOnly(0, ""), "does not start with '{'"},
		{"truncated JSON", hdr(`{"w":`), "invalid header"},
		{"trailing garbage", hdr(`{}x`), "invalid header"},
		{"second object", hdr(`{}{}`), "data after the JSON object"},
		{"tensor given twice", with(`{"w":{`+w4+`},"w":{`+w4+`}}`, d24[:4]), `key "w" given twice`},
		{"metadata given twice", hdr(`{"__metadata__":{},"__metadata__":{}}`), `key "__metadata__" given twice`},
		{"metadata key twice", hdr(`{"__metadata__":{"a":"1","a":"2"}}`), `__metadata__ "a" given twice`},
		{"entry key twice", with(`{"w":{`+w4+`,"dtype":"F32"}}`, d24[:4]), `key "dtype" given twice`},
		{"metadata not an object", hdr(`{"__metadata__":["a"]}`), "__metadata__ is not a JSON object"},
		{"non-string metadata", hdr(`{"__metadata__":{"k":1}}`), `__metadata__ "k": value 1 is not a string`},
		{"nested metadata", hdr(`{"__metadata__":{"k":{"x":"y"}}}`), `__metadata__ "k"`},
		{"unknown dtype", with(`{"w":{"dtype":"F8","shape":[3],"data_offsets":[0,3]}}`, d24[:3]), `tensor "w": invalid dtype "F8"`},
		{"sub-byte dtype", with(`{"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, d24[:1]), `invalid dtype "F4"`},
		{"dtype not a string", with(`{"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, d24[:4]), `invalid "dtype"`},
		{"dtype null", with(`{"w":{"dtype":null,"shape":[1],"data_offsets":[0,4]}}`, d24[:4]), `invalid "dtype"`},
		{"shape/offset mismatch", with(`{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}`, d24[:20]), `tensor "w": F32 shape [2 3] needs 6 elements of 4 bytes, but data_offsets [0, 20] span 20 bytes`},
		{"overlap", with(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}`, d24), `tensor "b": data_offsets [8, 24] overlap tensor "a", which ends at 16`},
		{"empty tensor inside another", with(`{"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}`, d24), `tensor "z": data_offsets [8, 8] overlap tensor "a"`},
		{"gap", with(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}`, d24), `data bytes [8, 16) before tensor "b" belong to no tensor`},
		{"gap at the start", with(`{"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}`, d24), `data bytes [0, 16) before tensor "b"`},
		{"past the end", with(`{"w":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}`, d24[:16]), `tensor "w": data_offsets [0, 24] run past the 16 bytes of data`},
		{"past any file", hdr(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}}`), "run past any file"},
		{"trailing data", with(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, d24), "data section has 24 bytes but its tensors cover only 8"},
		{"reversed offsets", with(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, d24[:8]), `data_offsets [8, 0] end before they start`},
		{"negative dimension", with(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"fractional dimension", with(`{"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"exponent dimension", with(`{"w":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"string dimension", with(`{"w":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"nested shape", with(`{"w":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"shape null", with(`{"w":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"dimension past uint64", with(`{"w":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"huge dimension beside zero", hdr(`{"w":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`), "is too large"},
		{"int overflow beside zero", hdr(`{"w":{"dtype":"F32","shape":[0,9223372036854775807,2],"data_offsets":[0,0]}}`), "more elements than an int"},
		{"element count overflow", hdr(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), "more elements than an int"},
		{"byte count overflow", hdr(`{"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}}`), "needs 4611686018427387904 elements of 8 bytes"},
		{"three offsets", with(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}`, d24[:4]), `invalid "data_offsets"`},
		{"negative offset", with(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[-0,4]}}`, d24[:4]), `invalid "data_offsets"`},
		{"extra key", with(`{"w":{`+w4+`,"x":1}}`, d24[:4]), `unexpected key "x": expected 3 keys`},
		{"missing dtype", with(`{"w":{"shape":[1],"data_offsets":[0,4],"x":1}}`, d24[:4]), `tensor "w": missing "dtype"`},
		{"missing offsets", with(`{"w":{"dtype":"F32","shape":[1]}}`, d24[:4]), `missing "data_offsets"`},
		{"entry not an object", hdr(`{"w":5}`), "invalid header"},
		{"entry null", hdr(`{"w":null}`), "is not a JSON object"},
		{"empty name", with(`{"":{`+w4+`}}`, d24[:4]), "tensor with an empty name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// The format's header limit holds even when the file backs the length.
func TestParseRefusesOversizedHeader(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100 MB")
	}
	b := make([]byte, 8+MaxHeader+1)
	binary.LittleEndian.PutUint64(b, MaxHeader+1)
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "limit of 100000000 bytes") {
		t.Fatalf("error %v", err)
	}
}

// Null metadata, as some writers emit, is no metadata.
func TestParseNullMetadata(t *testing.T) {
	f, err := Parse(fileBytes(`{"__metadata__":null}`, nil))
	if err != nil || f.Metadata() == nil || len(f.Metadata()) != 0 || len(f.Tensors()) != 0 {
		t.Fatalf("%v, %v", f, err)
	}
}

// Every proper prefix of a valid file is refused.
func TestParseRejectsEveryTruncation(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, map[string]string{"config": "{}"}, []Spec{{"a", F32, []int{2, 3}}, {"b", BF16, []int{1}}, {"c", F16, []int{}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range [][]float32{{1, 2, 3, 4, 5, 6}, {7}, {8}} {
		if err := w.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
	}
	full := buf.Bytes()
	if _, err := Parse(full); err != nil {
		t.Fatal(err)
	}
	for n := range len(full) {
		if _, err := Parse(full[:n]); err == nil {
			t.Fatalf("prefix of %d of %d bytes parsed", n, len(full))
		}
	}
}

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Open maps a file, names it in every error, and refuses what is not a regular file without
// blocking on a FIFO.
func TestOpen(t *testing.T) {
	path := writeFile(t, fileBytes(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, []byte{0, 0, 0x80, 0x3f}))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Tensor("w")
	x := make([]float32, 1)
	if err := w.Float32s(x); err != nil || x[0] != 1 {
		t.Fatalf("%v, %v", x, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	for _, b := range [][]byte{nil, {1, 2, 3}, fileBytes(`{"w":{}}`, nil)} {
		p := writeFile(t, b)
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want an error naming the file", b, err)
		}
	}
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := Open(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(link); err != nil {
		t.Errorf("Open of a link: %v", err)
	} else {
		f.Close()
	}
	if _, err := OpenNoFollow(link); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("OpenNoFollow of a link: %v", err)
	}
}
