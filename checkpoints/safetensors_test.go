package checkpoints

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safetensors"
)

// f32 builds a float32 from its bits, so tests can name NaN payloads and subnormals exactly.
func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// specialBits are float32 patterns that a careless codec would alter: NaN payloads (quiet and
// signalling, both signs), signed zeros, subnormals, extremes and infinities.
var specialBits = []uint32{
	0x7fc00000, 0x7fc00001, 0x7fa00001, 0xffbfffff, 0x7f800001, // NaNs
	0x00000000, 0x80000000, // +0, -0
	0x00000001, 0x807fffff, 0x00400000, // subnormals
	0x7f7fffff, 0xff7fffff, 0x00800000, // max, -max, min normal
	0x7f800000, 0xff800000, // +Inf, -Inf
	0x3f800000, 0xbf000000, 0x40490fdb, // 1, -0.5, pi
}

func bitsOf(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}

// sameTensors compares names, shapes and data bit for bit.
func sameTensors(t *testing.T, got, want []Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) {
			t.Fatalf("tensor %d: got %q %v, want %q %v", i, g.Name, g.Shape, w.Name, w.Shape)
		}
		if gb, wb := bitsOf(g.Data), bitsOf(w.Data); !slices.Equal(gb, wb) {
			t.Fatalf("tensor %q: data bits differ:\n got %08x\nwant %08x", w.Name, gb, wb)
		}
	}
}

func sameMeta(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("metadata has %d keys %v, want %d %v", len(got), got, len(want), want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("metadata[%q] = %q, want %q", k, got[k], v)
		}
	}
}

func TestSaveLoadRoundTripBitExact(t *testing.T) {
	special := make([]float32, len(specialBits))
	for i, b := range specialBits {
		special[i] = f32(b)
	}
	ramp := make([]float32, 4*5*6)
	for i := range ramp {
		ramp[i] = float32(i)*0.37 - 11
	}
	// Sorted by name: the order Load returns.
	tensors := []Tensor{
		{Name: "empty", Shape: []int{0, 5}, Data: []float32{}},
		{Name: "layers.0.attn.q_proj.weight", Shape: []int{4, 5, 6}, Data: ramp},
		{Name: "norm.weight", Shape: []int{len(special)}, Data: special},
		{Name: "scalar", Shape: []int{}, Data: []float32{f32(0x7fa00001)}},
		{Name: "ünïcode.权重", Shape: []int{1, 1}, Data: []float32{f32(0x80000000)}},
	}
	meta := map[string]string{
		MetaFormat: "pt",
		MetaConfig: `{"layers":24,"h":384,"note":"<a> & \"b\" é"}`,
		"empty":    "",
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	// Reversed input order must not change the file: the writer orders by name.
	rev := slices.Clone(tensors)
	slices.Reverse(rev)
	if err := Save(path, rev, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sameTensors(t, got, tensors)
	sameMeta(t, gotMeta, meta)

	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Save(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("saving the same tensors in another order gave different bytes")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != fileMode {
		t.Fatalf("file mode %v, want %v", fi.Mode().Perm(), os.FileMode(fileMode))
	}
}

func TestLoadEmptyMetadataIsNonNil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := Save(path, []Tensor{{Name: "a", Shape: []int{1}, Data: []float32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	_, meta, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta == nil || len(meta) != 0 {
		t.Fatalf("metadata = %#v, want an empty non-nil map", meta)
	}
}

// knownValues are the 2x3 tensor of the known-answer files and their little-endian bytes, written
// out by hand.
var knownValues = []float32{1, f32(0x80000000), f32(0x7fa00001), f32(0x00000001), f32(0xff800000), 3.5}

var knownData = []byte{
	0x00, 0x00, 0x80, 0x3f, // 1.0
	0x00, 0x00, 0x00, 0x80, // -0
	0x01, 0x00, 0xa0, 0x7f, // signalling NaN with payload 0x200001
	0x01, 0x00, 0x00, 0x00, // smallest subnormal
	0x00, 0x00, 0x80, 0xff, // -Inf
	0x00, 0x00, 0x60, 0x40, // 3.5
}

func fileBytes(header string, data []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestKnownAnswerWriterLayout(t *testing.T) {
	cases := []struct {
		name   string
		meta   map[string]string
		header string
	}{
		{"with metadata", map[string]string{"format": "pt"},
			`{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`},
		// 57 bytes of JSON padded with 7 spaces to a multiple of 8.
		{"without metadata", nil,
			`{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}       `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.header)%8 != 0 {
				t.Fatalf("test header is %d bytes, not 8-aligned", len(c.header))
			}
			want := fileBytes(c.header, knownData)
			path := filepath.Join(t.TempDir(), "w.safetensors")
			if err := Save(path, []Tensor{{Name: "w", Shape: []int{2, 3}, Data: knownValues}}, c.meta); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("writer output:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

func TestKnownAnswerReader(t *testing.T) {
	t.Run("foreign formatting", func(t *testing.T) {
		// Key order, whitespace and missing padding as another writer might produce them.
		header := `{ "w" : {"shape": [2, 3], "data_offsets": [0, 24], "dtype": "F32"},
			"__metadata__": {"format": "pt", "config": "{\"h\": 8}"} }`
		path := writeRaw(t, fileBytes(header, knownData))
		got, meta, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sameTensors(t, got, []Tensor{{Name: "w", Shape: []int{2, 3}, Data: knownValues}})
		sameMeta(t, meta, map[string]string{"format": "pt", "config": `{"h": 8}`})
	})
	t.Run("file order is offset order", func(t *testing.T) {
		header := `{"z":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
			`"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},` +
			`"m":{"dtype":"F32","shape":[0],"data_offsets":[12,12]}}`
		data := []byte{
			0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x80, // z = [1, -0]
			0x00, 0x00, 0xc0, 0x40, // a = [6]
		}
		path := writeRaw(t, fileBytes(header, data))
		got, _, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sameTensors(t, got, []Tensor{
			{Name: "z", Shape: []int{2}, Data: knownValues[:2]},
			{Name: "a", Shape: []int{1}, Data: []float32{6}},
			{Name: "m", Shape: []int{0}, Data: []float32{}},
		})
	})
	t.Run("scalar", func(t *testing.T) {
		path := writeRaw(t, fileBytes(`{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, knownData[20:24]))
		got, _, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sameTensors(t, got, []Tensor{{Name: "s", Shape: []int{}, Data: []float32{3.5}}})
	})
}

func writeRaw(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raw.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadRejectsHostileFiles(t *testing.T) {
	hdr := func(s string) []byte { return fileBytes(s, nil) }
	with := func(s string, data []byte) []byte { return fileBytes(s, data) }
	lenOnly := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	d24 := make([]byte, 24)
	cases := []struct {
		name string
		file []byte
		want string // substring of the error
	}{
		{"empty file", nil, "shorter than the 8-byte header length"},
		{"seven bytes", []byte{1, 2, 3, 4, 5, 6, 7}, "shorter than the 8-byte header length"},
		{"header length 2^62", lenOnly(1<<62, "{}"), "header length 4611686018427387904 exceeds the 2 bytes"},
		{"header length max uint64", lenOnly(math.MaxUint64, "{}"), "exceeds"},
		{"header length one past the end", lenOnly(3, "{}"), "header length 3 exceeds the 2 bytes"},
		{"non-UTF-8 header", hdr("{\"w\xff\":{}}"), "not valid UTF-8 (byte 3"},
		{"header not an object", hdr(`[1,2]`), "does not start with '{'"},
		{"null header", hdr(`null`), "does not start with '{'"},
		{"empty header", lenOnly(0, ""), "does not start with '{'"},
		{"truncated JSON", hdr(`{"w":`), "invalid header"},
		{"trailing garbage in header", hdr(`{}x`), "invalid header"},
		{"wrong dtype", with(`{"w":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}}`, d24), `tensor "w" has dtype F64, want F32`},
		{"unknown dtype", with(`{"w":{"dtype":"F8","shape":[3],"data_offsets":[0,3]}}`, d24[:3]), `tensor "w": invalid dtype "F8"`},
		{"shape/offset mismatch", with(`{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}`, d24[:20]), `tensor "w": F32 shape [2 3] needs 6 elements of 4 bytes, but data_offsets [0, 20] span 20 bytes`},
		{"overlapping offsets", with(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}`, d24), `tensor "b": data_offsets [8, 24] overlap tensor "a", which ends at 16`},
		{"gap between tensors", with(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}`, d24), `data bytes [8, 16) before tensor "b" belong to no tensor`},
		{"offsets past the end", with(`{"w":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}`, d24[:16]), `tensor "w": data_offsets [0, 24] run past the 16 bytes of data`},
		{"trailing data", with(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, d24), "data section has 24 bytes but its tensors cover only 8"},
		{"reversed offsets", with(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, d24[:8]), `tensor "w": data_offsets [8, 0] end before they start`},
		{"negative dimension", with(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"fractional dimension", with(`{"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`, d24[:4]), `invalid "shape"`},
		{"huge dimension beside zero", hdr(`{"w":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`), "is too large"},
		{"int overflow beside zero", hdr(`{"w":{"dtype":"F32","shape":[0,9223372036854775807,2],"data_offsets":[0,0]}}`), "more elements than an int"},
		{"element count overflow", hdr(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), "more elements than an int"},
		{"non-string metadata", hdr(`{"__metadata__":{"k":1}}`), `__metadata__ "k"`},
		{"extra tensor key", with(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, d24[:4]), "expected 3 keys"},
		{"missing dtype", with(`{"w":{"shape":[1],"data_offsets":[0,4],"x":1}}`, d24[:4]), `missing "dtype"`},
		{"tensor entry not an object", hdr(`{"w":5}`), "invalid header"},
		{"empty tensor name", with(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, d24[:4]), "empty name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeRaw(t, c.file)
			_, _, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Load error %v: want one naming the file and containing %q", err, c.want)
			}
			t.Log(err)
			// LoadAny accepts more dtypes but rejects F64 too, with its own wording.
			if _, _, err := LoadAny(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("LoadAny error %v: want one naming the file", err)
			}
			if _, err := LoadInto(path, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadInto error %v does not contain %q", err, c.want)
			}
			if _, err := LoadCheckpoint(path); err == nil {
				t.Error("LoadCheckpoint: no error")
			}
		})
	}
	if _, _, err := LoadAny(writeRaw(t, with(`{"w":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}}`, d24))); err == nil ||
		!strings.Contains(err.Error(), "want F32, F16 or BF16") {
		t.Errorf("LoadAny of F64: %v", err)
	}
}

func TestLoadRejectsEveryTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	err := Save(path, []Tensor{
		{Name: "a", Shape: []int{2, 3}, Data: knownValues},
		{Name: "b", Shape: []int{1}, Data: []float32{7}},
	}, map[string]string{"config": "{}"})
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(full) {
		if _, err := safetensors.Parse(full[:n]); err == nil {
			t.Fatalf("prefix of %d of %d bytes parsed without error", n, len(full))
		}
	}
	if err := os.WriteFile(path, full[:len(full)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("truncated file: %v", err)
	}
}

func TestLoadRejectsNonRegularAndMissing(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, _, err := Load(filepath.Join(dir, "nope")); err == nil || !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
}

// errorsUnwrapAll returns the innermost wrapped error, for os.IsNotExist, which does not unwrap.
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestSaveRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	ok := Tensor{Name: "a", Shape: []int{2}, Data: []float32{1, 2}}
	cases := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		want    string
	}{
		{"duplicate", []Tensor{ok, ok}, nil, `tensor "a" appears twice`},
		{"empty name", []Tensor{{Shape: []int{1}, Data: []float32{1}}}, nil, "empty name"},
		{"reserved name", []Tensor{{Name: "__metadata__", Shape: []int{1}, Data: []float32{1}}}, nil, "reserved"},
		{"non-UTF-8 name", []Tensor{{Name: "a\xff", Shape: []int{1}, Data: []float32{1}}}, nil, "not valid UTF-8"},
		{"short data", []Tensor{{Name: "a", Shape: []int{2, 3}, Data: []float32{1}}}, nil, "shape [2 3] has 6 elements but data has 1"},
		{"negative dim", []Tensor{{Name: "a", Shape: []int{-1}, Data: nil}}, nil, "negative dimension"},
		{"overflow", []Tensor{{Name: "a", Shape: []int{math.MaxInt, 2}, Data: nil}}, nil, "more elements than an int"},
		{"non-UTF-8 metadata value", []Tensor{ok}, map[string]string{"config": "\xfe"}, `metadata "config": value is not valid UTF-8`},
		{"non-UTF-8 metadata key", []Tensor{ok}, map[string]string{"\xfe": "x"}, "metadata key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".safetensors")
			err := Save(path, c.tensors, c.meta)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want one naming %s and containing %q", err, path, c.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("a file was created: %v", err)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("rejected saves left files: %v", entries)
	}
}

func TestLoadIntoAndCopyInto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	file := []Tensor{
		{Name: "a", Shape: []int{2, 3}, Data: knownValues},
		{Name: "b", Shape: []int{4}, Data: []float32{1, 2, 3, 4}},
		{Name: "c", Shape: []int{1}, Data: []float32{9}},
	}
	if err := Save(path, file, map[string]string{MetaConfig: `{"h":2}`}); err != nil {
		t.Fatal(err)
	}
	newDst := func() map[string][]float32 {
		return map[string][]float32{"a": make([]float32, 6), "b": make([]float32, 4), "c": make([]float32, 1)}
	}

	t.Run("exact match copies", func(t *testing.T) {
		dst := newDst()
		want := []Spec{{"c", []int{1}}, {"a", []int{2, 3}}, {"b", []int{4}}}
		meta, err := LoadInto(path, want, dst)
		if err != nil {
			t.Fatal(err)
		}
		sameMeta(t, meta, map[string]string{MetaConfig: `{"h":2}`})
		for _, f := range file {
			if !slices.Equal(bitsOf(dst[f.Name]), bitsOf(f.Data)) {
				t.Fatalf("dst[%q] = %v, want %v", f.Name, dst[f.Name], f.Data)
			}
		}
		dst2 := newDst()
		if err := CopyInto(file, want, dst2); err != nil {
			t.Fatal(err)
		}
		for _, f := range file {
			if !slices.Equal(bitsOf(dst2[f.Name]), bitsOf(f.Data)) {
				t.Fatalf("CopyInto dst[%q] = %v, want %v", f.Name, dst2[f.Name], f.Data)
			}
		}
	})

	t.Run("mismatches are all reported and nothing is copied", func(t *testing.T) {
		dst := newDst()
		dst["b"] = make([]float32, 5)
		dst["d"] = make([]float32, 2)
		for _, v := range dst {
			for i := range v {
				v[i] = -42
			}
		}
		want := []Spec{{"a", []int{2, 3}}, {"b", []int{5}}, {"d", []int{2}}}
		check := func(err error, label string) {
			if err == nil {
				t.Fatalf("%s: no error", label)
			}
			for _, s := range []string{
				`missing tensor "d" (want shape [2])`,
				`tensor "b" has shape [4], want [5]`,
				`unexpected tensor "c" (shape [1])`,
			} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: error %q does not contain %q", label, err, s)
				}
			}
			if strings.Contains(err.Error(), `tensor "a"`) {
				t.Errorf("%s: error blames the matching tensor a: %v", label, err)
			}
			for name, v := range dst {
				for _, x := range v {
					if x != -42 {
						t.Fatalf("%s: dst[%q] was written despite the error", label, name)
					}
				}
			}
		}
		_, err := LoadInto(path, want, dst)
		check(err, "LoadInto")
		if !strings.Contains(err.Error(), path) {
			t.Errorf("LoadInto error does not name the file: %v", err)
		}
		check(CopyInto(file, want, dst), "CopyInto")
	})

	t.Run("bad destinations", func(t *testing.T) {
		want := []Spec{{"a", []int{2, 3}}, {"b", []int{4}}, {"c", []int{1}}}
		dst := newDst()
		delete(dst, "c")
		dst["a"] = make([]float32, 5)
		_, err := LoadInto(path, want, dst)
		if err == nil || !strings.Contains(err.Error(), `no destination for tensor "c"`) ||
			!strings.Contains(err.Error(), `destination for tensor "a" has 5 elements, shape [2 3] needs 6`) {
			t.Fatalf("error %v", err)
		}
		_, err = LoadInto(path, append(want, Spec{"a", []int{2, 3}}), newDst())
		if err == nil || !strings.Contains(err.Error(), `tensor "a" is wanted twice`) {
			t.Fatalf("duplicate want: %v", err)
		}
	})

	t.Run("LoadInto refuses F16", func(t *testing.T) {
		p := writeRaw(t, fileBytes(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0x00, 0x3c}))
		_, err := LoadInto(p, []Spec{{"h", []int{1}}}, map[string][]float32{"h": {0}})
		if err == nil || !strings.Contains(err.Error(), `tensor "h" has dtype F16, want F32`) {
			t.Fatalf("error %v", err)
		}
	})
}
