package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gelo-research/geloattack/internal/crc"
)

// writeChecked writes texts through the Writer with small batches, so that both files have
// several record batches, and returns the meta.json it wrote.
func writeChecked(t *testing.T, dir, dtype string, texts []testText) Meta {
	t.Helper()
	const d = 12
	meta := Meta{Model: "m", D: d, E: 5, DType: dtype, Norm: NormRaw, Source: "test"}
	es := 2
	if dtype == Float32 {
		es = 4
	}
	// 7 token rows per tokens batch; texts batches of 7 texts (5 floats of 4 bytes each < 7*12*es).
	writeStore(t, dir, meta, texts, 7*d*es)
	m, err := readMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWriterRecordsChecksums checks what the writer records against the files as an independent
// parse sees them: one entry per record batch at its place, with its rows and text ids.
func TestWriterRecordsChecksums(t *testing.T) {
	const d, e = 12, 5
	texts := makeTexts(3, 40, 9, d, e)
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeChecked(t, dir, Float16, texts)
	if meta.FormatVersion != FormatVersion || meta.Checksums == nil {
		t.Fatalf("format_version %d, checksums %v", meta.FormatVersion, meta.Checksums)
	}
	for _, f := range []struct {
		name string
		fc   FileChecksums
		rows int64
	}{{TokensFile, meta.Checksums.Tokens, meta.NumTokens}, {TextsFile, meta.Checksums.Texts, meta.NumTexts}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		af, err := parseArrowFile(data)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != f.fc.Bytes || len(af.blocks) != len(f.fc.Batches) || len(af.blocks) < 3 {
			t.Fatalf("%s: %d bytes, %d batches; meta.json records %d bytes, %d batches (the test wants at least 3)",
				f.name, len(data), len(af.blocks), f.fc.Bytes, len(f.fc.Batches))
		}
		var rows int64
		for i, blk := range af.blocks {
			b := f.fc.Batches[i]
			rb, err := af.batch(i)
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := view[int64](rb.bufs[1], rb.rows, "text_id")
			if b.Offset != blk.offset || b.Length != blk.meta+blk.body || b.Rows != rb.rows ||
				b.FirstTextID != ids[0] || b.LastTextID != ids[len(ids)-1] || !crc.IsHex(b.CRC32C) {
				t.Fatalf("%s batch %d: recorded %+v; file has offset %d, length %d, %d rows, text_ids %d..%d",
					f.name, i, b, blk.offset, blk.meta+blk.body, rb.rows, ids[0], ids[len(ids)-1])
			}
			rows += rb.rows
		}
		if rows != f.rows {
			t.Fatalf("%s: %d rows, want %d", f.name, rows, f.rows)
		}
	}
	notes, err := ValidateNotes(t.Context(), dir, nil)
	if err != nil || notes != nil {
		t.Fatalf("ValidateNotes: notes %q, %v", notes, err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Notes() != nil {
		t.Fatalf("notes %q for a store with checksums", s.Notes())
	}
	checkStore(t, s, texts)
}

// flipSite is one bit to flip in a store file, and what Validate must say about it.
type flipSite struct {
	file string
	at   int
	bit  byte
	want string // substring of the error besides the store and file names
}

// TestValidateReportsEveryFlip flips one bit at a time in a store written by the Writer and runs
// Validate on each copy: every flip must be reported naming the store and the file, a flip inside
// a record batch as a checksum mismatch of that batch (whatever else it broke), a flip outside
// the batches as one of the frame. Sites, in each file: the first, middle and last byte of every
// record batch, every byte outside the batches (magic, schema, footer), and 300 random offsets;
// the flipped bit cycles through all 8 positions.
func TestValidateReportsEveryFlip(t *testing.T) {
	for _, dtype := range []string{Float16, Float32} {
		t.Run(dtype, func(t *testing.T) {
			texts := makeTexts(5, 24, 9, 12, 5)
			src := filepath.Join(t.TempDir(), "src")
			meta := writeChecked(t, src, dtype, texts)
			orig := map[string][]byte{}
			for _, name := range []string{TokensFile, TextsFile, MetaFile} {
				b, err := os.ReadFile(filepath.Join(src, name))
				if err != nil {
					t.Fatal(err)
				}
				orig[name] = b
			}
			// where says what Validate must report for a flip at offset at of a file.
			where := func(name string, fc FileChecksums, at int) string {
				for i, b := range fc.Batches {
					if int64(at) >= b.Offset && int64(at) < b.Offset+b.Length {
						return fmt.Sprintf("%s: record batch %d of %d (bytes [%d, %d)", name, i, len(fc.Batches), b.Offset, b.Offset+b.Length)
					}
				}
				return name + ": bytes outside the record batches (magic, schema, footer): checksum mismatch"
			}
			rng := rand.New(rand.NewPCG(9, 9))
			var sites []flipSite
			for _, f := range []struct {
				name string
				fc   FileChecksums
			}{{TokensFile, meta.Checksums.Tokens}, {TextsFile, meta.Checksums.Texts}} {
				size := len(orig[f.name])
				var offsets []int
				for _, b := range f.fc.Batches {
					offsets = append(offsets, int(b.Offset), int(b.Offset+b.Length/2), int(b.Offset+b.Length-1))
				}
				for at := 0; at < size; at++ {
					if strings.Contains(where(f.name, f.fc, at), "outside") {
						offsets = append(offsets, at)
					}
				}
				for k := 0; k < 300; k++ {
					offsets = append(offsets, rng.IntN(size))
				}
				for k, at := range offsets {
					sites = append(sites, flipSite{file: f.name, at: at, bit: 1 << (k % 8), want: where(f.name, f.fc, at)})
				}
			}
			dir := filepath.Join(t.TempDir(), "s")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range orig {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := Validate(t.Context(), dir, nil); err != nil {
				t.Fatalf("undamaged copy: %v", err)
			}
			files := map[string]*os.File{}
			for _, name := range []string{TokensFile, TextsFile} {
				f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files[name] = f
			}
			// poke writes one byte in place: far cheaper than rewriting the file for each site.
			poke := func(name string, at int, v byte) {
				if _, err := files[name].WriteAt([]byte{v}, int64(at)); err != nil {
					t.Fatal(err)
				}
			}
			batchSites := 0
			for _, site := range sites {
				poke(site.file, site.at, orig[site.file][site.at]^site.bit)
				err := Validate(t.Context(), dir, nil)
				if err == nil {
					t.Fatalf("%s byte %d bit %#02x flipped: valid", site.file, site.at, site.bit)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, "store "+dir+": "+site.want) {
					t.Fatalf("%s byte %d bit %#02x: error\n%s\ndoes not start with\nstore %s: %s", site.file, site.at, site.bit, msg, dir, site.want)
				}
				if !strings.Contains(site.want, "outside") {
					batchSites++
				}
				poke(site.file, site.at, orig[site.file][site.at])
			}
			t.Logf("%d flips reported (%d inside record batches)", len(sites), batchSites)
		})
	}
}

// TestValidateReportsDamagedMeta changes checksums recorded in meta.json.
func TestValidateReportsDamagedMeta(t *testing.T) {
	texts := makeTexts(5, 24, 9, 12, 5)
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeChecked(t, dir, Float16, texts)
	cases := []struct {
		name string
		edit func(m *Meta)
		want string
	}{
		{"batch checksum", func(m *Meta) { m.Checksums.Tokens.Batches[1].CRC32C = "00000000" }, "tokens.arrow: record batch 1 of"},
		{"upper-case checksum", func(m *Meta) { m.Checksums.Texts.Batches[0].CRC32C = "ABCDEF01" },
			`batch 0: crc32c "ABCDEF01" is not 8 lowercase hex digits`},
		{"frame checksum", func(m *Meta) { m.Checksums.Texts.FrameCRC32C = "0123abcd" }, "texts.arrow: bytes outside the record batches"},
		{"size", func(m *Meta) { m.Checksums.Tokens.Bytes++ }, "tokens.arrow: file is"},
		{"batch rows", func(m *Meta) { m.Checksums.Tokens.Batches[0].Rows++ }, "but the checksums of tokens.arrow record"},
		{"batch overlap", func(m *Meta) { m.Checksums.Tokens.Batches[1].Offset -= 8 }, "batch 1 at"},
		{"texts batches missing", func(m *Meta) { m.Checksums.Texts.Batches = nil }, "but the checksums of texts.arrow record 0 rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := meta
			cs := *meta.Checksums
			cs.Tokens.Batches = slices.Clone(cs.Tokens.Batches)
			cs.Texts.Batches = slices.Clone(cs.Texts.Batches)
			m.Checksums = &cs
			c.edit(&m)
			d := filepath.Join(t.TempDir(), "s")
			copyStore(t, dir, d, &m)
			err := Validate(t.Context(), d, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "store "+d) {
				t.Fatalf("error %v, want one naming the store and containing %q", err, c.want)
			}
		})
	}
}

// copyStore copies the store in src to dst, with meta.json replaced by meta when not nil.
func copyStore(t *testing.T, src, dst string, meta *Meta) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TokensFile, TextsFile, MetaFile} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == MetaFile && meta != nil {
			if b, err = json.MarshalIndent(meta, "", "  "); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOldStoreOpensWithNote opens and validates a store whose meta.json is as older builds wrote
// it (no checksums): both work, with a note naming the store.
func TestOldStoreOpensWithNote(t *testing.T) {
	texts := makeTexts(5, 24, 9, 12, 5)
	src := filepath.Join(t.TempDir(), "src")
	meta := writeChecked(t, src, Float16, texts)
	meta.Checksums, meta.IDHash = nil, ""
	dir := filepath.Join(t.TempDir(), "old")
	copyStore(t, src, dir, &meta)
	raw, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "checksums") || !strings.Contains(string(raw), `"format_version": 1`) {
		t.Fatalf("meta.json is not old-style:\n%s", raw)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("store %s: no checksums in meta.json (older store): data not verified; re-import, or run `geloattack store validate -store %s` to scan for NaN", dir, dir)
	if !slices.Equal(s.Notes(), []string{want}) {
		t.Fatalf("notes %q, want %q", s.Notes(), want)
	}
	checkStore(t, s, texts)
	s.Close()
	notes, err := ValidateNotes(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "store "+dir+": no checksums in meta.json (older store)") {
		t.Fatalf("notes %q", notes)
	}
	if err := Validate(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
}

// TestReadReportsNonFinite puts a NaN or Inf into the stored rows and candidate embeddings (as
// damage would, after the writer's checks) and reads them. Without checksums, Rows, RawRows and
// TextEmbedding name the store, the text_id and the position; with checksums, the first read of
// the damaged batch fails its checksum and names the batch, its checksums and the NaN in it. Reads
// that avoid the damage succeed, and Open succeeds: it does not read the data.
func TestReadReportsNonFinite(t *testing.T) {
	const d, e = 12, 5
	for _, dtype := range []string{Float16, Float32} {
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/old %v", dtype, old), func(t *testing.T) {
				texts := makeTexts(5, 24, 9, d, e)
				for i := range texts {
					texts[i].tokens = texts[i].tokens[:1]
					texts[i].rows = texts[i].rows[:d]
				}
				// Text 5 has 6 rows, rows 5 to 10 of the store, across the first boundary of
				// batches of 7 rows; its row at position 4 gets a NaN in column 9.
				x := &texts[5]
				x.tokens = []int32{1, 2, 3, 4, 5, 6}
				x.rows = make([]float32, 6*d)
				src := filepath.Join(t.TempDir(), "src")
				meta := writeChecked(t, src, dtype, texts)
				dir := filepath.Join(t.TempDir(), "s")
				if old {
					meta.Checksums, meta.IDHash = nil, ""
					copyStore(t, src, dir, &meta)
				} else {
					copyStore(t, src, dir, nil)
				}
				tokAt, txtAt := valueOffsets(t, dir, x.id, 4, 9, 3)
				nan := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
				if dtype == Float16 {
					nan = binary.LittleEndian.AppendUint16(nil, 0x7e00)
				}
				writeAt(t, filepath.Join(dir, TokensFile), tokAt, nan)
				writeAt(t, filepath.Join(dir, TextsFile), txtAt, binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Inf(-1)))))

				s, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				i, _ := s.IndexOf(x.id)
				rows := make([]float32, 6*d)
				// Without checksums the read names the text and position of the NaN; with them
				// the first read of the damaged batch fails its checksum, and the error names
				// the batch and, within it, the NaN.
				want := fmt.Sprintf("store %s: text_id %d, position 4 (tokens.arrow row 9): embedding[9] = NaN: the store is damaged", dir, x.id)
				wantEmb := fmt.Sprintf("store %s: text_id %d (texts.arrow row %d): candidate embedding[3] = -Inf: the store is damaged", dir, x.id, i)
				good := []struct{ start, n int }{{0, 4}, {5, 1}}
				if !old {
					want = fmt.Sprintf("store %s: tokens.arrow: record batch 1 of ", dir)
					wantEmb = fmt.Sprintf("store %s: texts.arrow: record batch 0 of ", dir)
					good = []struct{ start, n int }{{0, 2}}
				}
				for _, w := range []struct{ start, n int }{{0, 6}, {4, 1}, {3, 2}, {4, 1}} {
					err := s.Rows(i, w.start, w.n, rows)
					if err == nil || !strings.HasPrefix(err.Error(), want) {
						t.Fatalf("Rows(%d, %d): error %v, want one starting %q", w.start, w.n, err, want)
					}
					if !old && (!strings.Contains(err.Error(), fmt.Sprintf("checksum mismatch (stored crc32c %s, data ", meta.Checksums.Tokens.Batches[1].CRC32C)) ||
						!strings.Contains(err.Error(), fmt.Sprintf("row 9 (text_id %d, position 4): embedding[9] = NaN", x.id))) {
						t.Fatalf("Rows(%d, %d): error %v does not name the checksums and the NaN", w.start, w.n, err)
					}
				}
				for _, w := range good {
					if err := s.Rows(i, w.start, w.n, rows); err != nil {
						t.Fatalf("Rows(%d, %d) avoids the damage: %v", w.start, w.n, err)
					}
				}
				if dtype == Float16 {
					raw := make([]uint16, 6*d)
					if err := s.RawRows(i, 0, 6, raw); err == nil || !strings.HasPrefix(err.Error(), want) {
						t.Fatalf("RawRows: %v", err)
					}
				}
				emb := make([]float32, e)
				err = s.TextEmbedding(i, emb)
				if err == nil || !strings.HasPrefix(err.Error(), wantEmb) || !strings.Contains(err.Error(), "embedding[3] = -Inf") {
					t.Fatalf("TextEmbedding: error %v, want one starting %q and naming the -Inf", err, wantEmb)
				}
				other := make([]float32, e)
				if err := s.TextEmbedding(s.NumTexts()-1, other); err != nil {
					t.Fatal(err)
				}
				// Validate finds it too: as a checksum mismatch when there are checksums.
				err = Validate(t.Context(), dir, nil)
				wantValidate := fmt.Sprintf("store %s: tokens.arrow: row 9 (text_id %d, position 4): embedding[9] = NaN", dir, x.id)
				if !old {
					wantValidate = want
				}
				if err == nil || !strings.Contains(err.Error(), wantValidate) {
					t.Fatalf("Validate: %v, want an error containing %q", err, wantValidate)
				}
			})
		}
	}
}

// valueOffsets opens the store in dir and returns the file offsets of column col of the row at
// position pos of text textID in tokens.arrow, and of column ecol of its candidate embedding in
// texts.arrow.
func valueOffsets(t *testing.T, dir string, textID int64, pos, col, ecol int) (int, int) {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	i, ok := s.IndexOf(textID)
	if !ok {
		t.Fatalf("no text %d", textID)
	}
	base := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	tokAt := -1
	err = s.segments(i, pos, 1, func(tb *tokenBatch, r0, _ int) error {
		k := r0*s.D() + col
		if tb.emb16 != nil {
			tokAt = int(uintptr(unsafe.Pointer(&tb.emb16[k])) - base(s.tok))
		} else {
			tokAt = int(uintptr(unsafe.Pointer(&tb.emb32[k])) - base(s.tok))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tb, r := s.textRow(i)
	txtAt := int(uintptr(unsafe.Pointer(&tb.emb[r*s.E()+ecol])) - base(s.txt))
	return tokAt, txtAt
}

// writeAt overwrites the bytes of a file at offset at.
func writeAt(t *testing.T, path string, at int, b []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[at:], b)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadVerifiesBatchOnFirstUse flips the lowest bit of one stored value, a change no format
// check can see: Open succeeds, every read that touches the damaged batch fails naming it (from
// many goroutines at once, as the sampler's workers read), and reads of other batches succeed.
func TestReadVerifiesBatchOnFirstUse(t *testing.T) {
	const d = 12
	texts := makeTexts(5, 24, 9, d, 5)
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeChecked(t, dir, Float32, texts)
	victim := texts[10].id
	tokAt, _ := valueOffsets(t, dir, victim, 0, 3, 0)
	path := filepath.Join(dir, TokensFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[tokAt] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	damaged := -1
	for i, bc := range meta.Checksums.Tokens.Batches {
		if int64(tokAt) >= bc.Offset && int64(tokAt) < bc.Offset+bc.Length {
			damaged = i
		}
	}
	want := fmt.Sprintf("store %s: tokens.arrow: record batch %d of %d", dir, damaged, len(meta.Checksums.Tokens.Batches))
	errs := make(chan error, 8*s.NumTexts())
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			rows := make([]float32, 9*d)
			for i := 0; i < s.NumTexts(); i++ {
				errs <- s.Rows(i, 0, s.NumTokens(i), rows)
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	close(errs)
	failed := 0
	for err := range errs {
		if err == nil {
			continue
		}
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("error %v, want one starting %q", err, want)
		}
		failed++
	}
	// Every text with a row in the damaged batch fails, in each of the 8 goroutines.
	touching := 0
	for i := 0; i < s.NumTexts(); i++ {
		lo, hi := s.rowStart[i], s.rowStart[i]+int64(s.NumTokens(i))
		for _, tb := range s.tokens {
			if tb.block == damaged && lo < tb.start+int64(tb.n) && tb.start < hi {
				touching++
			}
		}
	}
	if touching == 0 || touching == s.NumTexts() || failed != 8*touching {
		t.Fatalf("%d reads failed; %d of %d texts touch the damaged batch, so want %d", failed, touching, s.NumTexts(), 8*touching)
	}
}
