package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
)

// The id hash. The checksums locate damage but prove nothing about an edit whose author recomputed
// them: two texts of one record batch whose text_ids are exchanged in both files, crc32c values
// recomputed, keep every rule of textorder.go (same order in both files, same first and last
// text_id per batch) and move both texts across the train/val split, pairing each id with the
// other's rows. meta.json's id_hash is a SHA-256 over the text ids with their n_tokens, in
// texts.arrow order, followed by every number and checksum that meta.json's checksums record:
//
//	"geloattack store id hash v1\n"
//	per text, in texts.arrow order:  text_id (int64 LE), n_tokens (int32 LE)
//	for tokens.arrow, then texts.arrow:
//	    bytes (int64 LE), frame_crc32c (8 hex digits), batch count (int64 LE)
//	    per batch: offset, length, rows, first_text_id, last_text_id (int64 LE each), crc32c (8 hex digits)
//
// Open recomputes it from the ids it reads anyway (O(texts), no embedding touched), so an id
// exchanged, reordered or renumbered in both files is refused, and so is data resealed with new
// checksums: the batches are verified against the checksums on first read, and the checksums are
// bound to the ids by this hash. What it cannot stop is a forger who recomputes the hash as well:
// it has no key, like the checksums, and guards against edits and tools that reseal only the
// checksums, not against an adversary who writes meta.json (see checksum.go).
//
// Stores written before the hash (checksums, no id_hash) still open, with a note saying so; a
// meta.json with an id_hash but no checksums is refused, since the hash covers them.

// idHashDomain starts every id hash, so that it cannot be confused with a hash of anything else.
const idHashDomain = "geloattack store id hash v1\n"

// idHasher accumulates a store's id hash: texts first, in texts.arrow order, then the checksums.
type idHasher struct {
	h   hash.Hash
	buf []byte
}

func newIDHasher() *idHasher {
	x := &idHasher{h: sha256.New(), buf: make([]byte, 0, 64)}
	x.h.Write([]byte(idHashDomain))
	return x
}

// addText adds the next text of texts.arrow.
func (x *idHasher) addText(id int64, nTokens int32) {
	x.buf = binary.LittleEndian.AppendUint64(x.buf[:0], uint64(id))
	x.buf = binary.LittleEndian.AppendUint32(x.buf, uint32(nTokens))
	x.h.Write(x.buf)
}

// sum adds the checksums of both files and returns the hash as 64 lowercase hex digits. The hasher
// is spent after it.
func (x *idHasher) sum(cs *Checksums) string {
	for _, fc := range []FileChecksums{cs.Tokens, cs.Texts} {
		x.int64s(fc.Bytes)
		x.h.Write([]byte(fc.FrameCRC32C))
		x.int64s(int64(len(fc.Batches)))
		for _, b := range fc.Batches {
			x.int64s(b.Offset, b.Length, b.Rows, b.FirstTextID, b.LastTextID)
			x.h.Write([]byte(b.CRC32C))
		}
	}
	return hex.EncodeToString(x.h.Sum(nil))
}

func (x *idHasher) int64s(vs ...int64) {
	x.buf = x.buf[:0]
	for _, v := range vs {
		x.buf = binary.LittleEndian.AppendUint64(x.buf, uint64(v))
	}
	x.h.Write(x.buf)
}

// isIDHash reports whether s is spelled as the writer writes an id hash: 64 lowercase hex digits.
func isIDHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkIDHash recomputes the id hash of an open store with checksums and compares it with
// meta.json's; a store without one passes (it carries a note instead).
func (s *Store) checkIDHash() error {
	want := s.meta.IDHash
	if want == "" || s.meta.Checksums == nil {
		return nil
	}
	x := newIDHasher()
	for i, id := range s.ids {
		x.addText(id, s.nTok[i])
	}
	if got := x.sum(s.meta.Checksums); got != want {
		return fmt.Errorf("%s: id_hash %s, but the %d text ids and n_tokens (in %s order) with the recorded checksums hash to %s: "+
			"text ids, their order or the data were changed after the store was written and the checksums recomputed",
			MetaFile, want, len(s.ids), TextsFile, got)
	}
	return nil
}

// noIDHashNote is the note for a store with checksums written before id hashes.
func noIDHashNote(dir string) string {
	return fmt.Sprintf("store %s: no id hash in %s (written before id hashes): text ids are checked against the first and last id of each record batch only, "+
		"so ids exchanged inside a batch with the checksums recomputed would not be seen; write the store again (store import or extract) to add one",
		dir, MetaFile)
}
