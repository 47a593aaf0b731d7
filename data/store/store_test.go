package store

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// checkStore compares every value a Store returns with the texts it was written from. want
// applies the store's rounding to an input value.
func checkStore(t *testing.T, s *Store, texts []testText) {
	t.Helper()
	d, e := s.D(), s.E()
	if s.NumTexts() != len(texts) {
		t.Fatalf("NumTexts = %d, want %d", s.NumTexts(), len(texts))
	}
	for _, x := range texts {
		i, ok := s.IndexOf(x.id)
		if !ok {
			t.Fatalf("text %d missing", x.id)
		}
		n := len(x.tokens)
		if s.TextID(i) != x.id || s.NumTokens(i) != n {
			t.Fatalf("text %d: id %d, %d tokens; want %d tokens", x.id, s.TextID(i), s.NumTokens(i), n)
		}
		rows := make([]float32, n*d)
		if err := s.Rows(i, 0, n, rows); err != nil {
			t.Fatal(err)
		}
		for j, v := range x.rows {
			want := v
			if s.Meta().DType == Float16 {
				want = numfmt.F16ToF32(numfmt.F32ToF16(v))
			}
			if math.Float32bits(rows[j]) != math.Float32bits(want) {
				t.Fatalf("text %d row %d col %d: %v (%#x), want %v (%#x)", x.id, j/d, j%d, rows[j], math.Float32bits(rows[j]), want, math.Float32bits(want))
			}
		}
		if s.Meta().DType == Float16 {
			raw := make([]uint16, n*d)
			if err := s.RawRows(i, 0, n, raw); err != nil {
				t.Fatal(err)
			}
			for j, v := range x.rows {
				if raw[j] != numfmt.F32ToF16(v) {
					t.Fatalf("text %d raw %d: %#04x, want %#04x", x.id, j, raw[j], numfmt.F32ToF16(v))
				}
			}
		}
		// A window in the middle reads the same rows as the full read.
		if n >= 3 {
			win := make([]float32, 2*d)
			if err := s.Rows(i, 1, 2, win); err != nil {
				t.Fatal(err)
			}
			for j := range win {
				if math.Float32bits(win[j]) != math.Float32bits(rows[d+j]) {
					t.Fatalf("text %d: window read differs at %d", x.id, j)
				}
			}
		}
		ids := make([]int32, n)
		pos := make([]int32, n)
		if err := s.TokenIDs(i, 0, n, ids); err != nil {
			t.Fatal(err)
		}
		if err := s.Positions(i, 0, n, pos); err != nil {
			t.Fatal(err)
		}
		for k := range ids {
			if ids[k] != x.tokens[k] || pos[k] != int32(k) {
				t.Fatalf("text %d token %d: id %d pos %d, want %d %d", x.id, k, ids[k], pos[k], x.tokens[k], k)
			}
		}
		emb := make([]float32, e)
		if err := s.TextEmbedding(i, emb); err != nil {
			t.Fatal(err)
		}
		for j := range emb {
			if math.Float32bits(emb[j]) != math.Float32bits(x.emb[j]) {
				t.Fatalf("text %d embedding[%d] = %v, want %v", x.id, j, emb[j], x.emb[j])
			}
		}
		text, has := s.Text(i)
		if has != x.hasText || text != x.text {
			t.Fatalf("text %d: Text = %q, %v; want %q, %v", x.id, text, has, x.text, x.hasText)
		}
	}
}

func TestWriterRoundTripIsBitExact(t *testing.T) {
	for _, dtype := range []string{Float16, Float32} {
		t.Run(dtype, func(t *testing.T) {
			const d, e = 12, 5
			texts := makeTexts(3, 40, 9, d, e)
			dir := filepath.Join(t.TempDir(), "s")
			meta := Meta{Model: "m", Layer: 10, D: d, E: e, DType: dtype, Norm: NormRaw, Source: "test"}
			// 7 rows per batch: most texts straddle a batch boundary.
			writeStore(t, dir, meta, texts, 7*d*meta.elemSize())
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if len(s.tokens) < 10 {
				t.Fatalf("%d token batches: the test wants many", len(s.tokens))
			}
			m := s.Meta()
			if m.NumTexts != 40 || m.Model != "m" || m.Layer != 10 || m.FormatVersion != FormatVersion || m.ToolVersion == "" {
				t.Fatalf("meta = %+v", m)
			}
			checkStore(t, s, texts)
			if err := Validate(t.Context(), dir, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWriterOutputReadsWithArrowGo checks the files with an independent decoder.
func TestWriterOutputReadsWithArrowGo(t *testing.T) {
	const d, e = 6, 3
	texts := makeTexts(5, 10, 6, d, e)
	dir := t.TempDir()
	writeStore(t, dir, Meta{D: d, E: e, DType: Float16, Norm: NormRMS}, texts, 5*d*2)
	f, err := os.Open(filepath.Join(dir, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ids []int64
	var bits []uint16
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		vals := rec.Column(3).(*array.FixedSizeList).ListValues().(*array.Float16)
		for _, v := range vals.Values() {
			bits = append(bits, v.Uint16())
		}
	}
	k := 0
	for _, x := range texts {
		for r := range x.tokens {
			if ids[k+r] != x.id {
				t.Fatalf("row %d: text_id %d, want %d", k+r, ids[k+r], x.id)
			}
		}
		for j, v := range x.rows {
			if bits[k*d+j] != numfmt.F32ToF16(v) {
				t.Fatalf("text %d value %d: %#04x, want %#04x", x.id, j, bits[k*d+j], numfmt.F32ToF16(v))
			}
		}
		k += len(x.tokens)
	}
	if k != len(ids) {
		t.Fatalf("%d rows, want %d", len(ids), k)
	}
}

// TestOpenReadsForeignLayouts reads files written by arrow-go builders, with texts.arrow in a
// different order from the token groups and several batch sizes.
func TestOpenReadsForeignLayouts(t *testing.T) {
	const d, e = 4, 3
	texts := makeTexts(9, 15, 5, d, e)
	for _, dtype := range []string{Float16, Float32} {
		for _, per := range []int{0, 1, 4} {
			raw := rawFromTexts(Meta{D: d, E: e, DType: dtype, Norm: NormRaw}, texts)
			raw.batchRows = per
			// Reverse texts.arrow: the store must not assume both files share an order.
			for a, b := 0, len(raw.txtID)-1; a < b; a, b = a+1, b-1 {
				raw.txtID[a], raw.txtID[b] = raw.txtID[b], raw.txtID[a]
				raw.txtN[a], raw.txtN[b] = raw.txtN[b], raw.txtN[a]
				raw.txt[a], raw.txt[b] = raw.txt[b], raw.txt[a]
				raw.txtNull[a], raw.txtNull[b] = raw.txtNull[b], raw.txtNull[a]
			}
			for k := range texts {
				copy(raw.txtEmb[k*e:(k+1)*e], texts[len(texts)-1-k].emb)
			}
			dir := t.TempDir()
			raw.write(t, dir)
			s, err := Open(dir)
			if err != nil {
				t.Fatalf("%s batch %d: %v", dtype, per, err)
			}
			checkStore(t, s, texts)
			if s.TextID(0) != texts[len(texts)-1].id {
				t.Fatal("text order does not follow texts.arrow")
			}
			s.Close()
		}
	}
}

func TestRowsAllocatesNothingAndFailsAfterClose(t *testing.T) {
	const d, e = 8, 2
	texts := makeTexts(1, 20, 10, d, e)
	dir := t.TempDir()
	writeStore(t, dir, Meta{D: d, E: e, DType: Float16, Norm: NormRaw}, texts, 3*d*2)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 10*d)
	i, _ := s.IndexOf(texts[4].id)
	n := s.NumTokens(i)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := s.Rows(i, 0, n, dst); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("Rows allocates %v times per call", allocs)
	}
	if err := s.Rows(i, n-1, 2, dst); err == nil {
		t.Fatal("read past the end of a text accepted")
	}
	if err := s.Rows(i, 0, n, dst[:n*d-1]); err == nil {
		t.Fatal("short destination accepted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Rows(i, 0, 1, dst); err == nil {
		t.Fatal("read after Close accepted")
	}
}

func TestWriterIsAtomicAndRefusesExistingStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	meta := Meta{D: 2, E: 1, DType: Float32, Norm: NormRaw}
	w, err := Create(dir, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddText(1, "", false, []int32{5}, []float32{1, 2}, []float32{1}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{MetaFile, TokensFile, TextsFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("%s exists before Close", name)
		}
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("incomplete store opened")
	}
	w.Abort()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("Abort left %v", left)
	}
	writeStore(t, dir, meta, []testText{{id: 1, tokens: []int32{1}, rows: []float32{1, 2}, emb: []float32{3}}}, 1<<20)
	if _, err := Create(dir, meta); err == nil {
		t.Fatal("Create over an existing store accepted")
	}
}

func TestWriterRejectsBadInputAndStaysUsable(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name    string
		id      int64
		text    string
		pos     []int32
		tokens  []int32
		rows    []float32
		emb     []float32
		wantErr string
	}{
		{"ragged rows", 2, "", nil, []int32{1, 2}, []float32{1, 2, 3}, []float32{1}, "rows hold 3 values, want 2 tokens x d=2 = 4"},
		{"no tokens", 2, "", nil, nil, nil, []float32{1}, "no tokens"},
		{"embedding width", 2, "", nil, []int32{1}, []float32{1, 2}, []float32{1, 2}, "embedding has 2 values, want e=1"},
		{"NaN row", 2, "", nil, []int32{1, 2}, []float32{1, 2, 3, nan}, []float32{1}, "row 1: embedding[1] = NaN"},
		{"Inf embedding", 2, "", nil, []int32{1}, []float32{1, 2}, []float32{inf}, "text embedding[0] = +Inf"},
		{"float16 overflow", 2, "", nil, []int32{1}, []float32{70000, 2}, []float32{1}, "overflows float16"},
		{"duplicate id", 1, "", nil, []int32{1}, []float32{1, 2}, []float32{1}, "duplicate text_id"},
		{"bad utf8", 2, "\xff", nil, []int32{1}, []float32{1, 2}, []float32{1}, "not valid UTF-8"},
		{"positions", 2, "", []int32{3, 3}, []int32{1, 2}, []float32{1, 2, 3, 4}, []float32{1}, "position[1] = 3"},
	}
	dir := t.TempDir()
	w, err := Create(dir, Meta{D: 2, E: 1, DType: Float16, Norm: NormRaw})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddText(1, "", false, []int32{1}, []float32{1, 2}, []float32{1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		err := w.AddTextAt(c.id, c.text, c.text != "", c.pos, c.tokens, c.rows, c.emb)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.wantErr)
		}
	}
	if err := w.AddText(3, "ok", true, []int32{1}, []float32{1, 2}, []float32{1}); err != nil {
		t.Fatalf("writer unusable after rejected input: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.NumTexts() != 2 || s.Meta().NumTokens != 2 {
		t.Fatalf("%d texts, %d tokens; want 2, 2", s.NumTexts(), s.Meta().NumTokens)
	}
}
