package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/crc"
)

// idBytes is a text_id as the id columns hold it.
func idBytes(id int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(id)) }

// swapIDs exchanges every occurrence of the 8-byte ids a and b in a copy of data, checking that
// each occurs want times (a text_id column holds an id once per row of its text).
func swapIDs(t *testing.T, data []byte, a, b int64, wantA, wantB int) []byte {
	t.Helper()
	find := func(id int64) []int {
		var at []int
		pat := idBytes(id)
		for off := 0; ; {
			i := bytes.Index(data[off:], pat)
			if i < 0 {
				return at
			}
			at = append(at, off+i)
			off += i + 1
		}
	}
	pa, pb := find(a), find(b)
	if len(pa) != wantA || len(pb) != wantB {
		t.Fatalf("text_id %d occurs %d times, %d %d times; want %d and %d", a, len(pa), b, len(pb), wantA, wantB)
	}
	out := bytes.Clone(data)
	for _, i := range pa {
		copy(out[i:], idBytes(b))
	}
	for _, i := range pb {
		copy(out[i:], idBytes(a))
	}
	return out
}

// resealCRCs recomputes the crc32c of every batch of fc over data, leaving the rest of what
// meta.json records (the batches' text ids) as written: what a tool that knows only the
// checksums does after editing a file.
func resealCRCs(fc *FileChecksums, data []byte) {
	for i, b := range fc.Batches {
		fc.Batches[i].CRC32C = crc.Hex(crc32.Checksum(data[b.Offset:b.Offset+b.Length], crc.Castagnoli))
	}
}

// Ids swapped under valid checksums are refused by Open (and so by Validate and every command
// that reads a store), naming the file and the ids: swapped in one file between two texts of
// equal length in different record batches (texts.arrow or tokens.arrow, meta.json's records
// recomputed in full), or in both files between the first texts of two batches with only the
// crc32c values recomputed. Before, each opened and validated: the first two paired one text's
// rows with the other's embedding, the third moved texts across the train/val split.
func TestOpenRefusesSwappedTextIDsUnderValidChecksums(t *testing.T) {
	const d, e = 12, 5
	texts := makeTexts(3, 40, 9, d, e)
	src := filepath.Join(t.TempDir(), "s")
	meta := writeChecked(t, src, Float16, texts)
	if err := Validate(t.Context(), src, nil); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tok, txt := read(TokensFile), read(TextsFile)
	// Texts batches hold 7 texts each (writeChecked): two texts of equal length, inside (not
	// first or last of) different batches.
	a, b := -1, -1
	for i := 1; i < len(texts) && b < 0; i++ {
		for j := i + 1; j < len(texts); j++ {
			if i/7 != j/7 && i%7 != 0 && i%7 != 6 && j%7 != 0 && j%7 != 6 && len(texts[i].tokens) == len(texts[j].tokens) {
				a, b = i, j
				break
			}
		}
	}
	if b < 0 {
		t.Fatal("no two texts of equal length in different batches")
	}
	ta, tb := texts[a], texts[b]
	n := len(ta.tokens)
	first0, first1 := texts[0], texts[7]

	for _, c := range []struct {
		name string
		make func() (tok, txt []byte, m Meta)
		want string
	}{
		{"texts.arrow only, fully resealed", func() ([]byte, []byte, Meta) {
			x := swapIDs(t, txt, ta.id, tb.id, 1, 1)
			m := meta
			cs := *meta.Checksums
			fc, err := fileChecksums(x)
			if err != nil {
				t.Fatal(err)
			}
			cs.Texts = fc
			m.Checksums = &cs
			return tok, x, m
		}, "opposite order"},
		{"tokens.arrow only, fully resealed", func() ([]byte, []byte, Meta) {
			x := swapIDs(t, tok, ta.id, tb.id, n, n)
			m := meta
			cs := *meta.Checksums
			fc, err := fileChecksums(x)
			if err != nil {
				t.Fatal(err)
			}
			cs.Tokens = fc
			m.Checksums = &cs
			return x, txt, m
		}, "opposite order"},
		{"both files, first texts of two batches, crc32c recomputed", func() ([]byte, []byte, Meta) {
			x := swapIDs(t, txt, first0.id, first1.id, 1, 1)
			y := swapIDs(t, tok, first0.id, first1.id, len(first0.tokens), len(first1.tokens))
			m := meta
			var cs Checksums
			raw, _ := json.Marshal(meta.Checksums) // a deep copy
			if err := json.Unmarshal(raw, &cs); err != nil {
				t.Fatal(err)
			}
			resealCRCs(&cs.Texts, x)
			resealCRCs(&cs.Tokens, y)
			m.Checksums = &cs
			return y, x, m
		}, "meta.json records"},
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
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatalf("Open accepted the store with swapped text ids")
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, dir) {
				t.Errorf("Open: %v; want an error naming the store and %q", err, c.want)
			}
			if err := Validate(t.Context(), dir, nil); err == nil {
				t.Errorf("Validate accepted the store with swapped text ids")
			}
		})
	}
}
