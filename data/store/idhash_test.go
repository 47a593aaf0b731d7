package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// specIDHash computes the id hash from idhash.go's description of its bytes, apart from idHasher,
// over the ids and n_tokens the store reports and the checksums of meta.
func specIDHash(s *Store, cs *Checksums) string {
	var b []byte
	b = append(b, "geloattack store id hash v1\n"...)
	for i := range s.NumTexts() {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.TextID(i)))
		b = binary.LittleEndian.AppendUint32(b, uint32(s.NumTokens(i)))
	}
	for _, fc := range []FileChecksums{cs.Tokens, cs.Texts} {
		b = binary.LittleEndian.AppendUint64(b, uint64(fc.Bytes))
		b = append(b, fc.FrameCRC32C...)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(fc.Batches)))
		for _, x := range fc.Batches {
			for _, v := range []int64{x.Offset, x.Length, x.Rows, x.FirstTextID, x.LastTextID} {
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
			}
			b = append(b, x.CRC32C...)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The writer records the id hash as idhash.go describes its bytes, and an honest store opens and
// validates with no note.
func TestWriterRecordsIDHash(t *testing.T) {
	for _, dtype := range []string{Float16, Float32} {
		dir := filepath.Join(t.TempDir(), "s")
		meta := writeChecked(t, dir, dtype, makeTexts(9, 30, 9, 12, 5))
		if !isIDHash(meta.IDHash) {
			t.Fatalf("%s: id_hash %q", dtype, meta.IDHash)
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := specIDHash(s, meta.Checksums); meta.IDHash != want {
			t.Errorf("%s: id_hash %s, the description gives %s", dtype, meta.IDHash, want)
		}
		if len(s.Notes()) != 0 {
			t.Errorf("%s: notes %q on an honest store", dtype, s.Notes())
		}
		s.Close()
		if notes, err := ValidateNotes(t.Context(), dir, nil); err != nil || len(notes) != 0 {
			t.Errorf("%s: validate: %v, notes %q", dtype, err, notes)
		}
	}
}

// Two texts of one record batch (neither its first nor its last) exchange text_ids in both files,
// consistently (each keeps its n_tokens, so every run still matches), and meta.json's checksums are
// recomputed in full (crc32c, first and last ids: what the checksums alone let a tool redo): every
// rule of textorder.go still holds, and before the id hash the store opened and validated with
// the two texts on each other's side of the split. Open and Validate now refuse it naming the id
// hash; so do data resealed with new checksums (no id changed) and a flipped id_hash.
func TestOpenRefusesIDsExchangedInsideABatch(t *testing.T) {
	const d, e = 12, 5
	texts := makeTexts(3, 40, 9, d, e)
	src := filepath.Join(t.TempDir(), "s")
	meta := writeChecked(t, src, Float16, texts)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tok, txt := read(TokensFile), read(TextsFile)
	// Texts batches hold 7 texts (writeChecked): texts 2 and 4 are inside the first.
	ta, tb := texts[2], texts[4]
	recompute := func(tokB, txtB []byte) Meta {
		m := meta
		var cs Checksums
		var err error
		if cs.Tokens, err = fileChecksums(tokB); err != nil {
			t.Fatal(err)
		}
		if cs.Texts, err = fileChecksums(txtB); err != nil {
			t.Fatal(err)
		}
		m.Checksums = &cs
		return m
	}
	for _, c := range []struct {
		name string
		make func() (tok, txt []byte, m Meta)
	}{
		{"ids exchanged in both files, checksums recomputed", func() ([]byte, []byte, Meta) {
			x := swapIDs(t, txt, ta.id, tb.id, 1, 1)
			y := swapIDs(t, tok, ta.id, tb.id, len(ta.tokens), len(tb.tokens))
			return y, x, recompute(y, x)
		}},
		{"a byte of a tokens batch changed, checksums recomputed", func() ([]byte, []byte, Meta) {
			y := slices.Clone(tok)
			off := meta.Checksums.Tokens.Batches[1].Offset + meta.Checksums.Tokens.Batches[1].Length - 2
			y[off] ^= 0x01
			return y, txt, recompute(y, txt)
		}},
		{"id_hash flipped", func() ([]byte, []byte, Meta) {
			m := meta
			h := []byte(m.IDHash)
			h[10] = map[bool]byte{true: '1', false: '0'}[h[10] == '0']
			m.IDHash = string(h)
			return tok, txt, m
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tokB, txtB, m := c.make()
			dir := filepath.Join(t.TempDir(), "s")
			copyStore(t, src, dir, &m)
			for name, data := range map[string][]byte{TokensFile: tokB, TextsFile: txtB} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := openErr(dir)
			if err == nil {
				t.Fatal("Open accepted the edited store")
			}
			if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "id_hash "+m.IDHash) || !strings.Contains(msg, "changed after the store was written") {
				t.Errorf("Open: %v; want an error naming the store and its id_hash", err)
			}
			if err := Validate(t.Context(), dir, nil); err == nil {
				t.Error("Validate accepted the edited store")
			}
			// Without the id hash (as before it), the same store opens: the hash is what refuses it.
			m.IDHash = ""
			raw, _ := json.Marshal(m)
			if err := os.WriteFile(filepath.Join(dir, MetaFile), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := openErr(dir); err != nil {
				t.Errorf("without id_hash: %v", err)
			}
		})
	}
}

// A store written before id hashes (data/store/testdata/pre-id-hash, written by the writer of
// commit 81d7c70: checksums, no id_hash) opens, reads and validates, with a note saying that its
// text ids are checked per batch only; store info's integrity line says the same.
func TestPreIDHashStoreOpensWithNote(t *testing.T) {
	dir := filepath.Join("testdata", "pre-id-hash")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := s.Meta()
	if m.Checksums == nil || m.IDHash != "" || m.NumTexts != 9 {
		t.Fatalf("fixture meta: checksums %v, id_hash %q, %d texts: not a store of the writer before id hashes", m.Checksums != nil, m.IDHash, m.NumTexts)
	}
	want := noIDHashNote(dir)
	if !slices.Equal(s.Notes(), []string{want}) || !strings.Contains(want, "no id hash in meta.json (written before id hashes)") {
		t.Errorf("notes %q, want %q", s.Notes(), want)
	}
	// Every row reads: its batches verify against the recorded checksums.
	for i := range s.NumTexts() {
		rows := make([]float32, s.NumTokens(i)*s.D())
		if err := s.Rows(i, 0, s.NumTokens(i), rows); err != nil {
			t.Fatal(err)
		}
	}
	notes, err := ValidateNotes(t.Context(), dir, nil)
	if err != nil || !slices.Equal(notes, []string{want}) {
		t.Errorf("validate: %v, notes %q", err, notes)
	}
	info, err := ComputeInfo(t.Context(), s, 8, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.String(), "no id hash (written before id hashes)") {
		t.Errorf("store info does not say the store has no id hash:\n%s", info)
	}
}

// meta.json's id_hash is checked as read: one without checksums (which it covers) or not spelled
// as 64 lowercase hex digits is refused.
func TestMetaIDHashChecked(t *testing.T) {
	cs := &Checksums{Tokens: FileChecksums{FrameCRC32C: "00000000"}, Texts: FileChecksums{FrameCRC32C: "00000000"}}
	base := Meta{FormatVersion: FormatVersion, D: 4, E: 4, DType: Float32, Norm: NormRaw, Checksums: cs}
	good := strings.Repeat("0a", 32)
	for _, c := range []struct {
		hash string
		cs   *Checksums
		want string
	}{
		{good, nil, "id_hash without checksums"},
		{strings.Repeat("0A", 32), cs, "not 64 lowercase hex digits"},
		{good[:62], cs, "not 64 lowercase hex digits"},
		{good + "00", cs, "not 64 lowercase hex digits"},
	} {
		m := base
		m.IDHash, m.Checksums = c.hash, c.cs
		if err := m.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("id_hash %q, checksums %v: %v, want %q", c.hash, c.cs != nil, err, c.want)
		}
	}
	m := base
	m.IDHash = good
	if err := m.check(); err != nil {
		t.Errorf("a well-formed id_hash: %v", err)
	}
}
