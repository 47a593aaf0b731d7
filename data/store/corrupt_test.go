package store

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// baseTexts are four texts of 2, 1, 1 and 3 rows (ids 1000, 1003, 1006, 1009).
func baseTexts(d, e int) []testText {
	texts := makeTexts(11, 4, 1, d, e)
	for i, n := range []int{2, 1, 1, 3} {
		x := makeTexts(uint64(20+i), 1, 1, d*n, e)[0]
		texts[i].tokens = make([]int32, n)
		for k := range texts[i].tokens {
			texts[i].tokens[k] = int32(10*i + k)
		}
		texts[i].rows = x.rows
	}
	return texts
}

func TestOpenAndValidateRejectCorruptStores(t *testing.T) {
	const d, e = 8, 3
	texts := baseTexts(d, e)
	cases := []struct {
		name     string
		dtype    string                         // Float16 when empty
		raw      func(r *rawStore)              // edits the columns before writing
		files    func(t *testing.T, dir string) // edits the files after writing
		validate bool                           // Open must pass and Validate fail
		want     []string                       // substrings the error must contain
	}{
		{name: "meta missing", files: remove(MetaFile), want: []string{"meta.json missing"}},
		{name: "meta unknown field", files: editMeta(`"norm"`, `"bogus": 1, "norm"`), want: []string{"meta.json", `unknown field "bogus"`}},
		{name: "meta version", files: editMeta(`"format_version":1`, `"format_version":2`), want: []string{"format_version = 2"}},
		{name: "meta dtype", files: editMeta(`"dtype":"float16"`, `"dtype":"bfloat16"`), want: []string{`dtype = "bfloat16"`}},
		{name: "meta num_tokens", raw: func(r *rawStore) { r.meta.NumTokens++ }, want: []string{"texts.arrow", "n_tokens sum to 7, but meta.json says num_tokens = 8"}},
		{name: "meta num_texts", raw: func(r *rawStore) { r.meta.NumTexts = 5 }, want: []string{"texts.arrow", "4 rows, but meta.json says num_texts = 5"}},
		{name: "row width", raw: func(r *rawStore) { r.tokWidth = 6 },
			want: []string{"tokens.arrow", `field "embedding": want fixed_size_list<float16>[8], got fixed_size_list<float16>[6]`}},
		{name: "row dtype", raw: func(r *rawStore) { r.tokDType = Float32 },
			want: []string{"tokens.arrow", `field "embedding": want fixed_size_list<float16>[8], got fixed_size_list<float32>[8]`}},
		{name: "text embedding width", raw: func(r *rawStore) { r.txtWidth = 4 },
			want: []string{"texts.arrow", `field "embedding": want fixed_size_list<float32>[3], got fixed_size_list<float32>[4]`}},
		{name: "position type", raw: func(r *rawStore) { r.posType = arrow.PrimitiveTypes.Int64 },
			want: []string{"tokens.arrow", `field "position": want int32, got int64`}},
		{name: "field name", raw: func(r *rawStore) { r.tokNames = []string{"text_id", "pos", "token_id", "embedding"} },
			want: []string{"tokens.arrow", `field 1 is "pos", want "position"`}},
		{name: "missing text id", raw: func(r *rawStore) { r.tokText[0], r.tokText[1] = 77, 77 },
			want: []string{"tokens.arrow: row 0: text_id 77 is not in texts.arrow"}},
		{name: "tokens not grouped", raw: func(r *rawStore) { r.tokText[3] = 1000; r.tokPos[3] = 2 },
			want: []string{"tokens.arrow: row 3: text_id 1000 appears again after its rows from row 0: tokens not grouped by text"}},
		{name: "position order", raw: func(r *rawStore) { r.tokPos[4], r.tokPos[5] = 1, 0 },
			want: []string{"tokens.arrow: row 5 (text_id 1009): position 0 after 1: rows not in position order"}},
		{name: "negative position", raw: func(r *rawStore) { r.tokPos[2] = -1 },
			want: []string{"tokens.arrow: row 2 (text_id 1003): position -1 is negative"}},
		{name: "n_tokens mismatch", raw: func(r *rawStore) { r.txtN[0], r.txtN[3] = 3, 2 },
			want: []string{"tokens.arrow: text_id 1000 has 2 rows [0, 2), but texts.arrow says n_tokens = 3"}},
		{name: "n_tokens zero", raw: func(r *rawStore) { r.txtN[1], r.txtN[3] = 0, 4 },
			want: []string{"texts.arrow: row 1 (text_id 1003): n_tokens = 0"}},
		{name: "duplicate text id", raw: func(r *rawStore) { r.txtID[1] = 1000 },
			want: []string{"texts.arrow: rows 0 and 1: duplicate text_id 1000"}},
		{name: "compressed", raw: func(r *rawStore) { r.compressed = true },
			want: []string{"compressed body: stores must be uncompressed"}},
		{name: "texts.arrow missing", files: remove(TextsFile), want: []string{"texts.arrow", "no such file"}},
		{name: "empty tokens.arrow", files: truncate(TokensFile, 0), want: []string{"tokens.arrow: file of 0 bytes is too small"}},
		{name: "truncated by one byte", files: truncate(TokensFile, -1), want: []string{"tokens.arrow: trailing magic"}},
		{name: "truncated in the middle", files: truncate(TokensFile, -200), want: []string{"tokens.arrow: trailing magic"}},
		{name: "leading magic flipped", files: flip(TokensFile, 0), want: []string{"tokens.arrow: leading magic"}},
		{name: "footer length corrupt", files: setFooterLen(TokensFile, 1<<30), want: []string{"tokens.arrow: footer length 1073741824 does not fit"}},
		{name: "footer length short", files: setFooterLen(TextsFile, 16), want: []string{"texts.arrow: footer"}},
		{name: "NaN row", validate: true, raw: func(r *rawStore) { r.tokEmb[5*d+3] = 0x7e00 },
			want: []string{"tokens.arrow: row 5 (text_id 1009, position 1): embedding[3] = NaN"}},
		{name: "Inf row float32", dtype: Float32, validate: true, raw: func(r *rawStore) { r.tokEmb[2*d+7] = math.Float32bits(float32(math.Inf(-1))) },
			want: []string{"tokens.arrow: row 2 (text_id 1003, position 0): embedding[7] = -Inf"}},
		{name: "Inf text embedding", validate: true, raw: func(r *rawStore) { r.txtEmb[1*e+2] = float32(math.Inf(1)) },
			want: []string{"texts.arrow: row 1 (text_id 1003): embedding[2] = +Inf"}},
		{name: "negative token id", validate: true, raw: func(r *rawStore) { r.tokID[6] = -5 },
			want: []string{"tokens.arrow: row 6 (text_id 1009, position 2): token_id = -5 is negative"}},
		{name: "invalid utf8 text", validate: true, raw: func(r *rawStore) { r.txt[1], r.txtNull[1] = "a\xffb", false },
			want: []string{"texts.arrow: row 1 (text_id 1003): text is not valid UTF-8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dtype := c.dtype
			if dtype == "" {
				dtype = Float16
			}
			raw := rawFromTexts(Meta{D: d, E: e, DType: dtype, Norm: NormRaw}, texts)
			if c.raw != nil {
				c.raw(raw)
			}
			dir := t.TempDir()
			raw.write(t, dir)
			if c.files != nil {
				c.files(t, dir)
			}
			s, err := Open(dir)
			if c.validate {
				if err != nil {
					t.Fatalf("Open: %v (the defect is for Validate to find)", err)
				}
				s.Close()
				err = Validate(t.Context(), dir, nil)
			} else if err == nil {
				s.Close()
			}
			if err == nil {
				t.Fatalf("accepted; want an error mentioning %q", c.want)
			}
			for _, w := range append(c.want, "store "+dir) {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q\ndoes not mention %q", err, w)
				}
			}
		})
	}
}

func remove(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// editMeta replaces old by new in meta.json (compact JSON as the test writer produces it).
func editMeta(old, new string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		path := filepath.Join(dir, MetaFile)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), old) {
			t.Fatalf("meta.json %s lacks %s", raw, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(raw), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// truncate cuts a file to n bytes, or by -n bytes when n < 0.
func truncate(name string, n int64) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		path := filepath.Join(dir, name)
		if n < 0 {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
		if err := os.Truncate(path, n); err != nil {
			t.Fatal(err)
		}
	}
}

func rewrite(t *testing.T, path string, edit func(b []byte)) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func flip(name string, at int) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func(b []byte) { b[at] ^= 0xff })
	}
}

func setFooterLen(name string, v uint32) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func(b []byte) { binary.LittleEndian.PutUint32(b[len(b)-10:], v) })
	}
}

// TestEveryTruncationAndByteFlipIsHandled cuts tokens.arrow and texts.arrow at every length and
// flips every byte of their metadata (everything outside the embedding values): Open must return
// an error or a store whose reads and Validate behave, never panic. Truncation must always fail.
func TestEveryTruncationAndByteFlipIsHandled(t *testing.T) {
	const d, e = 8, 3
	dir := t.TempDir()
	writeStore(t, dir, Meta{D: d, E: e, DType: Float16, Norm: NormRaw}, baseTexts(d, e), 3*d*2)
	meta, err := readMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(dir, TextsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, which := range []string{TokensFile, TextsFile} {
		orig := tok
		if which == TextsFile {
			orig = txt
		}
		for n := 0; n < len(orig); n++ {
			a, b := tok, txt
			if which == TokensFile {
				a = aligned(orig[:n])
			} else {
				b = aligned(orig[:n])
			}
			if s, err := openData(dir, meta, a, b); err == nil {
				s.Close()
				t.Fatalf("%s cut to %d of %d bytes accepted", which, n, len(orig))
			} else if !strings.Contains(err.Error(), which) {
				t.Fatalf("%s cut to %d bytes: error %q does not name the file", which, n, err)
			}
		}
		accepted := 0
		for at := 0; at < len(orig); at++ {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				c := aligned(orig)
				c[at] ^= mask
				a, b := tok, txt
				if which == TokensFile {
					a = c
				} else {
					b = c
				}
				if exerciseOpen(t, dir, meta, a, b) {
					accepted++
				}
			}
		}
		t.Logf("%s: %d bytes, %d of %d single-byte corruptions still open (data bytes, padding)", which, len(orig), accepted, 3*len(orig))
	}
}

// aligned copies b into a fresh allocation, which Go aligns to 8 bytes as a memory map would be.
func aligned(b []byte) []byte {
	c := make([]byte, len(b), len(b)+8)
	copy(c, b)
	return c
}

// exerciseOpen opens store bytes and, when that succeeds, reads every value and validates;
// it reports whether the bytes opened. Any panic fails the test through the test binary.
func exerciseOpen(t testing.TB, dir string, meta Meta, tok, txt []byte) bool {
	// Open's checksum checks run first (on a store with checksums most damage stops there), then
	// the structural ones on their own, so that the parser sees every input too.
	if s, err := openVerified(dir, meta, tok, txt); err != nil {
		if !strings.Contains(err.Error(), "store "+dir) {
			t.Fatalf("error %q does not name the store", err)
		}
	} else {
		s.Close()
	}
	s, err := openData(dir, meta, tok, txt)
	if err != nil {
		if !strings.Contains(err.Error(), "store "+dir) {
			t.Fatalf("error %q does not name the store", err)
		}
		return false
	}
	defer s.Close()
	row := make([]float32, s.D()*64)
	ids := make([]int32, 64)
	emb := make([]float32, s.E())
	// Reads fail only on a NaN or Inf, which the flipped bytes may have made, naming the store.
	damaged := func(err error) {
		if err != nil && (!strings.Contains(err.Error(), "store "+dir) || !strings.Contains(err.Error(), "the store is damaged")) {
			t.Fatal(err)
		}
	}
	for i := 0; i < s.NumTexts(); i++ {
		n := min(s.NumTokens(i), 64)
		damaged(s.Rows(i, 0, n, row))
		if err := s.TokenIDs(i, 0, n, ids); err != nil {
			t.Fatal(err)
		}
		damaged(s.TextEmbedding(i, emb))
		s.Text(i)
	}
	if err := s.scan(t.Context(), nil); err != nil && !strings.Contains(err.Error(), "store "+dir) {
		t.Fatalf("validate error %q does not name the store", err)
	}
	return true
}

// TestFirstNonFiniteFindsEveryLane puts each special value at each column of rows whose start is
// or is not 8-byte aligned, next to the largest finite values, which must never be flagged.
func TestFirstNonFiniteFindsEveryLane(t *testing.T) {
	for d := 1; d <= 9; d++ {
		for _, bad := range []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff} {
			for r := 0; r < 3; r++ {
				for j := 0; j < d; j++ {
					emb := make([]uint16, 3*d)
					for k := range emb {
						emb[k] = []uint16{0x7bff, 0xfbff, 0x0001, 0x8000}[k%4]
					}
					tb := &tokenBatch{n: 3, emb16: emb}
					if got, _ := firstNonFinite(tb, r, d); got != -1 {
						t.Fatalf("d=%d row %d: finite row flagged at %d", d, r, got)
					}
					emb[r*d+j] = bad
					if got, v := firstNonFinite(tb, r, d); got != j || !(math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
						t.Fatalf("d=%d row %d: %#04x at %d reported at %d (%v)", d, r, bad, j, got, v)
					}
				}
			}
		}
	}
}
