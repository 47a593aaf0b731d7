package store

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npy"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// npzArray is one array of a test npz file: a Go slice npyio can write, or float16 bits.
type npzArray struct {
	value any      // []int32, []int8, []float32... written by npyio
	f16   []uint16 // written by writeNPYFloat16 when value is nil
	shape []int
}

// writeNPYFloat16 writes a version 1.0 .npy of binary16 values; npyio has no float16.
func writeNPYFloat16(w *bytes.Buffer, shape []int, bits []uint16) {
	dims := make([]string, len(shape))
	for i, s := range shape {
		dims[i] = fmt.Sprint(s)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	hdr := fmt.Sprintf("{'descr': '<f2', 'fortran_order': False, 'shape': (%s), }", tuple)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(hdr)))
	w.WriteString(hdr)
	for _, b := range bits {
		binary.Write(w, binary.LittleEndian, b)
	}
}

// writeNPZ writes arrays into an npz file, deflated or stored as np.savez_compressed / np.savez do.
func writeNPZ(t *testing.T, path string, arrays map[string]npzArray, deflate bool) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, a := range arrays {
		method := zip.Store
		if deflate {
			method = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: method})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if a.value != nil {
			if err := npy.Write(&b, a.value); err != nil {
				t.Fatal(err)
			}
		} else {
			writeNPYFloat16(&b, a.shape, a.f16)
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// refText is what one reference-layout file holds.
type refText struct {
	name   string
	tokens []int32
	mask   []int8
	raw    []uint16 // (seq, d) binary16 bits
	rms    []uint16
}

// finiteHalf draws a random finite binary16 bit pattern: every sign, exponent (subnormals
// included) and mantissa.
func finiteHalf(rng *rand.Rand) uint16 {
	for {
		h := uint16(rng.Uint32())
		if h&0x7c00 != 0x7c00 {
			return h
		}
	}
}

func makeRefTexts(seed uint64, names []string, d int) []refText {
	rng := rand.New(rand.NewPCG(seed, 3))
	out := make([]refText, len(names))
	for i, name := range names {
		seq := 4 + rng.IntN(8)
		r := refText{name: name, tokens: make([]int32, seq), mask: make([]int8, seq), raw: make([]uint16, seq*d), rms: make([]uint16, seq*d)}
		for p := range r.tokens {
			r.tokens[p] = int32(rng.IntN(32000))
			r.mask[p] = 1
			for j := 0; j < d; j++ {
				r.raw[p*d+j], r.rms[p*d+j] = finiteHalf(rng), finiteHalf(rng)
			}
		}
		// Left padding, right padding and a hole, as batched exports produce.
		switch i % 3 {
		case 0:
			r.mask[0], r.mask[1] = 0, 0
		case 1:
			r.mask[seq-1] = 0
		case 2:
			r.mask[seq/2] = 0
		}
		out[i] = r
	}
	return out
}

func (r refText) write(t *testing.T, dir string, deflate bool, extra map[string]npzArray) {
	seq, d := len(r.tokens), len(r.raw)/len(r.tokens)
	arrays := map[string]npzArray{
		"token_ids":      {value: r.tokens},
		"attention_mask": {value: r.mask},
		"embeddings":     {f16: r.raw, shape: []int{seq, d}},
		"embeddings_rms": {f16: r.rms, shape: []int{seq, d}},
	}
	for k, v := range extra {
		arrays[k] = v
		if v.value == nil && v.f16 == nil {
			delete(arrays, k) // an empty entry removes the array
		}
	}
	writeNPZ(t, filepath.Join(dir, r.name), arrays, deflate)
}

func TestImportNPZIsBitExactAndDropsMaskedRows(t *testing.T) {
	const d = 6
	src := t.TempDir()
	names := []string{"text_00007.npz", "text_00003.npz", "text_00012.npz", "text_00100.npz", "text_00005.npz"}
	refs := makeRefTexts(1, names, d)
	for i, r := range refs {
		r.write(t, src, i%2 == 0, nil)
	}
	for _, norm := range []string{NormRaw, NormRMS} {
		t.Run(norm, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "store")
			var progress int
			err := ImportNPZ(t.Context(), src, out, ImportOptions{Norm: norm, Model: "llama", Layer: 10, Progress: func(done, total int) { progress = done }})
			if err != nil {
				t.Fatal(err)
			}
			if progress != len(names) {
				t.Fatalf("progress reached %d of %d", progress, len(names))
			}
			s, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := s.Meta()
			if m.D != d || m.E != d || m.DType != Float16 || m.Norm != norm || m.Model != "llama" || m.Layer != 10 || !strings.Contains(m.Source, "file-name numbers") {
				t.Fatalf("meta = %+v", m)
			}
			// Texts come out in text_id order: 3, 5, 7, 12, 100.
			for k, want := range []int64{3, 5, 7, 12, 100} {
				if s.TextID(k) != want {
					t.Fatalf("text %d has id %d, want %d", k, s.TextID(k), want)
				}
			}
			for _, r := range refs {
				var id int64
				fmt.Sscanf(r.name, "text_%d.npz", &id)
				i, ok := s.IndexOf(id)
				if !ok {
					t.Fatalf("%s: text %d missing", r.name, id)
				}
				src := r.raw
				if norm == NormRMS {
					src = r.rms
				}
				var wantBits []uint16
				var wantPos, wantTok []int32
				for p, keep := range r.mask {
					if keep != 0 {
						wantBits = append(wantBits, src[p*d:(p+1)*d]...)
						wantPos = append(wantPos, int32(p))
						wantTok = append(wantTok, r.tokens[p])
					}
				}
				n := s.NumTokens(i)
				if n != len(wantPos) {
					t.Fatalf("%s: %d rows, want %d unmasked", r.name, n, len(wantPos))
				}
				bits := make([]uint16, n*d)
				pos := make([]int32, n)
				tok := make([]int32, n)
				if err := s.RawRows(i, 0, n, bits); err != nil {
					t.Fatal(err)
				}
				s.Positions(i, 0, n, pos)
				s.TokenIDs(i, 0, n, tok)
				for j := range bits {
					if bits[j] != wantBits[j] {
						t.Fatalf("%s: value %d = %#04x, want %#04x", r.name, j, bits[j], wantBits[j])
					}
				}
				for k := range pos {
					if pos[k] != wantPos[k] || tok[k] != wantTok[k] {
						t.Fatalf("%s: row %d: position %d token %d, want %d %d", r.name, k, pos[k], tok[k], wantPos[k], wantTok[k])
					}
				}
				// Default candidate embedding: the L2-normalised mean of the kept rows.
				mean := make([]float64, d)
				for j, h := range wantBits {
					mean[j%d] += float64(numfmt.F16ToF32(h))
				}
				var norm2 float64
				for _, v := range mean {
					norm2 += v * v
				}
				emb := make([]float32, d)
				s.TextEmbedding(i, emb)
				for j := range emb {
					if want := mean[j] / math.Sqrt(norm2); math.Abs(float64(emb[j])-want) > 1e-6 {
						t.Fatalf("%s: embedding[%d] = %v, want %v", r.name, j, emb[j], want)
					}
				}
			}
		})
	}
}

func TestImportNPZOptionsAndSkips(t *testing.T) {
	const d, e = 4, 3
	src := t.TempDir()
	refs := makeRefTexts(2, []string{"b.npz", "a.npz", "c.npz"}, d)
	for i := range refs[2].mask {
		refs[2].mask[i] = 0 // c.npz keeps nothing
	}
	for i, r := range refs {
		emb := []float32{float32(i), 1, 2}
		r.write(t, src, false, map[string]npzArray{"text_embedding": {value: emb}})
	}
	out := filepath.Join(t.TempDir(), "s")
	var warnings []string
	if err := ImportNPZ(t.Context(), src, out, ImportOptions{Warn: func(m string) { warnings = append(warnings, m) }}); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "c.npz") {
		t.Fatalf("warnings %q, want one about c.npz", warnings)
	}
	s, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// No numbers in the names: ids follow sorted names, a=0, b=1 (c=2 skipped).
	if s.NumTexts() != 2 || s.TextID(0) != 0 || s.TextID(1) != 1 || s.E() != e || !strings.Contains(s.Meta().Source, "sorted") {
		t.Fatalf("%d texts, ids %d %d, e %d, source %q", s.NumTexts(), s.TextID(0), s.TextID(1), s.E(), s.Meta().Source)
	}
	emb := make([]float32, e)
	s.TextEmbedding(0, emb) // a.npz was written second: text_embedding[0] = 1
	if emb[0] != 1 || emb[1] != 1 || emb[2] != 2 {
		t.Fatalf("text_embedding of a.npz = %v", emb)
	}
	if err := ImportNPZ(t.Context(), src, filepath.Join(t.TempDir(), "s"), ImportOptions{IDs: IDsName}); err == nil || !strings.Contains(err.Error(), "no number in the file name") {
		t.Fatalf("IDsName without numbers: %v", err)
	}
}

func TestImportNPZRejectsBadFiles(t *testing.T) {
	const d = 4
	cases := []struct {
		name string
		edit func(r *refText, extra map[string]npzArray)
		opts ImportOptions
		want string
	}{
		{"no rms", func(r *refText, x map[string]npzArray) { x["embeddings_rms"] = npzArray{} }, ImportOptions{Norm: NormRMS}, `array "embeddings_rms" missing`},
		{"rows vs seq", func(r *refText, x map[string]npzArray) {
			x["embeddings"] = npzArray{f16: r.raw[:len(r.raw)-d], shape: []int{len(r.tokens) - 1, d}}
		}, ImportOptions{}, "embeddings: shape"},
		{"mask length", func(r *refText, x map[string]npzArray) { x["attention_mask"] = npzArray{value: r.mask[1:]} }, ImportOptions{}, "attention_mask: shape"},
		{"NaN", func(r *refText, x map[string]npzArray) { r.raw[d*(len(r.tokens)-2)+1] = 0x7e01 }, ImportOptions{}, "embedding[1] = NaN"},
		{"float64", func(r *refText, x map[string]npzArray) {
			x["embeddings"] = npzArray{value: make([]float64, len(r.raw))}
		}, ImportOptions{}, `dtype "<f8"`},
		{"bad norm", nil, ImportOptions{Norm: "l2"}, `norm "l2"`},
		// 2 bytes * seq * 2^62 wraps to 0 for an even seq: the size check passed and the row
		// copy panicked (issue 24 class 5).
		{"shape overflow", func(r *refText, x map[string]npzArray) {
			x["embeddings"] = npzArray{f16: []uint16{}, shape: []int{len(r.tokens), 1 << 62}}
		}, ImportOptions{}, "overflows 64 bits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			refs := makeRefTexts(3, []string{"t1.npz", "t2.npz"}, d)
			refs[0].write(t, src, false, nil)
			extra := map[string]npzArray{}
			if c.edit != nil {
				c.edit(&refs[1], extra)
			}
			refs[1].write(t, src, false, extra)
			out := filepath.Join(t.TempDir(), "s")
			err := ImportNPZ(t.Context(), src, out, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
			if c.edit != nil && !strings.Contains(err.Error(), "t2.npz") {
				t.Fatalf("error %q does not name the file", err)
			}
			if left, _ := os.ReadDir(out); len(left) != 0 {
				t.Fatalf("failed import left %v", left)
			}
		})
	}
}

func TestParseNPYHeader(t *testing.T) {
	for _, c := range []struct {
		in    string
		descr string
		shape []int
		bad   bool
	}{
		{in: "{'descr': '<f2', 'fortran_order': False, 'shape': (12, 384), }", descr: "<f2", shape: []int{12, 384}},
		{in: "{'shape': (7,), 'fortran_order': False, 'descr': '|i1'}", descr: "|i1", shape: []int{7}},
		{in: `{"descr": "<i4", "fortran_order": False, "shape": ()}`, descr: "<i4"},
		{in: "{'descr': '<f2', 'shape': (3,)}", bad: true},
		{in: "{'descr': '<f2', 'fortran_order': False, 'shape': (-1,)}", bad: true},
		{in: "{'descr': '<f2", bad: true},
		{in: "", bad: true},
	} {
		a, _, err := parseNPYHeader(c.in)
		if c.bad != (err != nil) {
			t.Fatalf("%q: error %v", c.in, err)
		}
		if !c.bad && (a.descr != c.descr || fmt.Sprint(a.shape) != fmt.Sprint(c.shape)) {
			t.Fatalf("%q: %s %v", c.in, a.descr, a.shape)
		}
	}
}

// ReadNPZDir reads the same files ImportNPZ imports, in memory: text-id order, the unmasked rows
// widened exactly, their positions and tokens; it refuses a name without a number.
func TestReadNPZDir(t *testing.T) {
	const d = 5
	src := t.TempDir()
	names := []string{"text_00007.npz", "text_00003.npz", "text_00012.npz"}
	refs := makeRefTexts(4, names, d)
	for i, r := range refs {
		r.mask[0] = int8(i % 2) // texts 0 and 2 drop their first row
		r.write(t, src, i == 1, nil)
	}
	got, err := ReadNPZDir(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != 3 || got[1].ID != 7 || got[2].ID != 12 {
		t.Fatalf("ids %v, want 3 7 12", []int64{got[0].ID, got[1].ID, got[2].ID})
	}
	for _, r := range refs {
		var id int64
		fmt.Sscanf(r.name, "text_%d.npz", &id)
		k := slices.IndexFunc(got, func(g NPZRows) bool { return g.ID == id })
		g := got[k]
		var j int
		for p, keep := range r.mask {
			if keep == 0 {
				continue
			}
			if g.Positions[j] != int32(p) || g.Tokens[j] != r.tokens[p] {
				t.Fatalf("%s row %d: position %d token %d, want %d %d", r.name, j, g.Positions[j], g.Tokens[j], p, r.tokens[p])
			}
			for c := 0; c < d; c++ {
				if w := numfmt.F16ToF32(r.raw[p*d+c]); math.Float32bits(g.Rows[j*d+c]) != math.Float32bits(w) {
					t.Fatalf("%s row %d col %d: %v, want %v", r.name, j, c, g.Rows[j*d+c], w)
				}
			}
			j++
		}
		if j != len(g.Tokens) || g.D != d || len(g.Rows) != j*d {
			t.Fatalf("%s: %d rows of width %d (%d values), want %d of %d", r.name, len(g.Tokens), g.D, len(g.Rows), j, d)
		}
	}
	refs[0].name = "nonumber.npz"
	refs[0].write(t, src, false, nil)
	if _, err := ReadNPZDir(t.Context(), src); err == nil || !strings.Contains(err.Error(), "nonumber.npz") {
		t.Fatalf("a file without a number in its name: %v", err)
	}
}
