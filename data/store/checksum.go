package store

import (
	"context"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/gelo-research/geloattack/internal/crc"
)

// Checksums. The writer records in meta.json, for each Arrow file, its size, a CRC-32C of every
// record batch (the batch's message and body, bytes [offset, offset+length) of the file) and one
// CRC-32C of everything else (the magic, the schema message, the footer), so that every byte of
// the file is covered exactly once and a damaged batch is located: Validate names the file, the
// batch, its rows and its text ids. The batch locations come from meta.json, not from the file's
// own footer, so verification does not depend on the structure that damage may have broken.
//
// CRC-32C (Castagnoli) rather than a cryptographic hash: the threat is accidental damage (a
// flipped bit on disk, a torn copy), not an adversary, who could rewrite meta.json anyway. It
// detects every burst of up to 32 flipped bits and Go computes it with the CPU's CRC instructions
// at many GB/s, so verification costs less than reading the data from disk.
//
// Open checks the sizes and the frame checksums, a few kilobytes. The batch checksums need every
// byte of a batch read, so Open leaves them to the reads: the first read that touches a batch
// verifies it, once (see Store.Rows), so a store larger than memory still opens in constant time,
// no batch is used unverified, and a batch that is never read costs nothing. Validate verifies
// them all (`geloattack store validate`). Reads also check what they return for NaN and Inf.

// Checksums are the CRC-32C checksums of a store's two Arrow files, recorded in meta.json by the
// writer (absent in stores written before checksums).
type Checksums struct {
	// Tokens covers tokens.arrow.
	Tokens FileChecksums `json:"tokens.arrow"`
	// Texts covers texts.arrow.
	Texts FileChecksums `json:"texts.arrow"`
}

// FileChecksums covers one Arrow IPC file.
type FileChecksums struct {
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// FrameCRC32C is the CRC-32C of every byte outside the record batches, in file order: the
	// magic, the schema message, the footer and its length. 8 lowercase hex digits.
	FrameCRC32C string `json:"frame_crc32c"`
	// Batches lists the record batches in file order.
	Batches []BatchChecksum `json:"batches"`
}

// BatchChecksum covers one record batch.
type BatchChecksum struct {
	// Offset and Length locate the batch's message and body in the file.
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	// Rows is the batch's row count.
	Rows int64 `json:"rows"`
	// FirstTextID and LastTextID are the text_id of its first and last row (0 when it has none),
	// so that a damaged batch can be reported by the texts it holds.
	FirstTextID int64 `json:"first_text_id"`
	LastTextID  int64 `json:"last_text_id"`
	// CRC32C is the CRC-32C of the batch's bytes, 8 lowercase hex digits.
	CRC32C string `json:"crc32c"`
}

// fileChecksums computes the checksums of an Arrow file the writer has just written, locating its
// batches with the same parser the reader uses (so the writer also proves that it can be read).
func fileChecksums(data []byte) (FileChecksums, error) {
	f, err := parseArrowFile(data)
	if err != nil {
		return FileChecksums{}, err
	}
	fc := FileChecksums{Bytes: int64(len(data)), Batches: make([]BatchChecksum, len(f.blocks))}
	for i, blk := range f.blocks {
		rb, err := f.batch(i)
		if err != nil {
			return FileChecksums{}, err
		}
		b := BatchChecksum{Offset: blk.offset, Length: blk.meta + blk.body, Rows: rb.rows}
		if len(rb.bufs) < 2 {
			return FileChecksums{}, fmt.Errorf("record batch %d: %d buffers, want the text_id column first", i, len(rb.bufs))
		}
		ids, err := view[int64](rb.bufs[1], rb.rows, fmt.Sprintf("record batch %d: text_id", i))
		if err != nil {
			return FileChecksums{}, err
		}
		if len(ids) > 0 {
			b.FirstTextID, b.LastTextID = ids[0], ids[len(ids)-1]
		}
		b.CRC32C = crc.Hex(crc32.Checksum(data[b.Offset:b.Offset+b.Length], crc.Castagnoli))
		fc.Batches[i] = b
	}
	frame, err := frameCRC(data, fc.Batches)
	if err != nil {
		return FileChecksums{}, err
	}
	fc.FrameCRC32C = crc.Hex(frame)
	return fc, nil
}

// frameCRC is the CRC-32C of the bytes of data outside batches, which must be in file order,
// disjoint and inside data (checkLayout guarantees it for a meta.json read from disk).
func frameCRC(data []byte, batches []BatchChecksum) (uint32, error) {
	var c uint32
	pos := int64(0)
	for i, b := range batches {
		if b.Offset < pos || b.Length < 0 || b.Offset > int64(len(data))-b.Length {
			return 0, fmt.Errorf("record batch %d at [%d, %d+%d) overlaps the previous one or runs past the %d-byte file", i, b.Offset, b.Offset, b.Length, len(data))
		}
		c = crc32.Update(c, crc.Castagnoli, data[pos:b.Offset])
		pos = b.Offset + b.Length
	}
	return crc32.Update(c, crc.Castagnoli, data[pos:]), nil
}

// checkLayout validates one file's checksums as read from meta.json: sizes, batch locations in
// order and inside the file, checksum spelling, and the row total.
func (fc FileChecksums) checkLayout(name, rowsKey string, rows int64) error {
	if fc.Bytes < 0 {
		return fmt.Errorf("checksums of %s: bytes = %d", name, fc.Bytes)
	}
	if !crc.IsHex(fc.FrameCRC32C) {
		return fmt.Errorf("checksums of %s: frame_crc32c %q is not 8 lowercase hex digits", name, fc.FrameCRC32C)
	}
	pos, total := int64(0), int64(0)
	for i, b := range fc.Batches {
		switch {
		case b.Offset < pos || b.Length <= 0 || b.Offset > fc.Bytes-b.Length:
			return fmt.Errorf("checksums of %s: batch %d at [%d, %d+%d) is out of order or outside the %d-byte file", name, i, b.Offset, b.Offset, b.Length, fc.Bytes)
		case b.Rows < 0 || b.Rows > math.MaxInt64-total:
			return fmt.Errorf("checksums of %s: batch %d: rows = %d", name, i, b.Rows)
		case !crc.IsHex(b.CRC32C):
			return fmt.Errorf("checksums of %s: batch %d: crc32c %q is not 8 lowercase hex digits", name, i, b.CRC32C)
		}
		pos, total = b.Offset+b.Length, total+b.Rows
	}
	if total != rows {
		return fmt.Errorf("%s = %d, but the checksums of %s record %d rows in its batches", rowsKey, rows, name, total)
	}
	return nil
}

// verifyFrame checks a file's size and its frame checksum: cheap (the schema and the footer are a
// few kilobytes), so Open does it.
func (fc FileChecksums) verifyFrame(name string, data []byte) error {
	if int64(len(data)) != fc.Bytes {
		return fmt.Errorf("%s: file is %d bytes, meta.json records %d: truncated, extended or replaced", name, len(data), fc.Bytes)
	}
	c, err := frameCRC(data, fc.Batches)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if got := crc.Hex(c); got != fc.FrameCRC32C {
		return fmt.Errorf("%s: bytes outside the record batches (magic, schema, footer): checksum mismatch (stored crc32c %s, data %s)",
			name, fc.FrameCRC32C, got)
	}
	return nil
}

// verifyBatch checks batch i of a file whose size verifyFrame has checked. The error names the
// batch by its place, bytes, rows and the text ids meta.json records for it.
func (fc FileChecksums) verifyBatch(name string, data []byte, i int) error {
	if i >= len(fc.Batches) {
		return fmt.Errorf("%s: record batch %d: meta.json records only %d batches", name, i, len(fc.Batches))
	}
	b := fc.Batches[i]
	if b.Offset < 0 || b.Length < 0 || b.Offset > int64(len(data))-b.Length {
		return fmt.Errorf("%s: record batch %d at [%d, %d+%d) runs past the %d-byte file", name, i, b.Offset, b.Offset, b.Length, len(data))
	}
	if got := crc.Hex(crc32.Checksum(data[b.Offset:b.Offset+b.Length], crc.Castagnoli)); got != b.CRC32C {
		first := int64(0)
		for _, p := range fc.Batches[:i] {
			first += p.Rows
		}
		return fmt.Errorf("%s: record batch %d of %d (bytes [%d, %d), rows [%d, %d), text_ids %d..%d): checksum mismatch (stored crc32c %s, data %s)",
			name, i, len(fc.Batches), b.Offset, b.Offset+b.Length, first, first+b.Rows, b.FirstTextID, b.LastTextID, b.CRC32C, got)
	}
	return nil
}

// verifyAll checks both files completely: sizes, frames and every batch, returning the first
// mismatch. Validate runs it when a store does not even open, to tell damage from a bad writer.
func verifyAll(ctx context.Context, dir string, cs *Checksums, tok, txt []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: corrupt or truncated data: %v", dir, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for _, f := range []struct {
		name string
		fc   FileChecksums
		data []byte
	}{{TokensFile, cs.Tokens, tok}, {TextsFile, cs.Texts, txt}} {
		if err := f.fc.verifyFrame(f.name, f.data); err != nil {
			return fmt.Errorf("store %s: %w", dir, err)
		}
		for i := range f.fc.Batches {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("store %s: validate: %w", dir, err)
			}
			if err := f.fc.verifyBatch(f.name, f.data, i); err != nil {
				return fmt.Errorf("store %s: %w", dir, err)
			}
		}
	}
	return nil
}

// computeChecksums reads back the two files a writer has just finished (under their temporary
// names) and computes their checksums.
func computeChecksums(tokPath, txtPath string) (*Checksums, error) {
	cs := &Checksums{}
	for _, f := range []struct {
		path string
		name string
		dst  *FileChecksums
	}{{tokPath, TokensFile, &cs.Tokens}, {txtPath, TextsFile, &cs.Texts}} {
		data, unmap, err := mapFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: read back for checksums: %w", f.name, err)
		}
		fc, err := fileChecksums(data)
		uerr := unmap()
		if err != nil {
			return nil, fmt.Errorf("%s: read back for checksums: %w", f.name, err)
		}
		if uerr != nil {
			return nil, fmt.Errorf("%s: %w", f.name, uerr)
		}
		*f.dst = fc
	}
	return cs, nil
}

// noChecksumsNote is the note for a store written before checksums.
func noChecksumsNote(dir string) string {
	return fmt.Sprintf("store %s: no checksums in %s (older store): data not verified; re-import, or run `geloattack store validate -store %s` to scan for NaN",
		dir, MetaFile, filepath.Clean(dir))
}

// batchCheck is the once-only verification of one record batch.
type batchCheck struct {
	once sync.Once
	err  error
}

// checkTokens verifies the tokens batch tb against its checksum on first use and returns the
// (remembered) result; with a mismatch, the error also names the batch's first NaN or Inf.
func (s *Store) checkTokens(tb *tokenBatch) error {
	if s.tokChecks == nil {
		return nil
	}
	if tb.block >= len(s.tokChecks) {
		return fmt.Errorf("store %s: %s: record batch %d: meta.json records only %d batches", s.dir, TokensFile, tb.block, len(s.tokChecks))
	}
	c := &s.tokChecks[tb.block]
	c.once.Do(func() { c.err = s.verifyTokens(tb) })
	return c.err
}

// verifyTokens is checkTokens' work.
func (s *Store) verifyTokens(tb *tokenBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: %s: batch %d: corrupt or truncated data: %v", s.dir, TokensFile, tb.block, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := s.verifyBatch(true, tb.block); err != nil {
		d := s.meta.D
		for r := 0; r < tb.n; r++ {
			if j, v := firstNonFinite(tb, r, d); j >= 0 {
				return fmt.Errorf("%w; the damaged batch holds row %d (text_id %d, position %d): embedding[%d] = %v",
					err, tb.start+int64(r), tb.textID[r], tb.pos[r], j, v)
			}
		}
		return err
	}
	return nil
}

// checkTexts is checkTokens for a texts batch.
func (s *Store) checkTexts(tb *textBatch) error {
	if s.txtChecks == nil {
		return nil
	}
	if tb.block >= len(s.txtChecks) {
		return fmt.Errorf("store %s: %s: record batch %d: meta.json records only %d batches", s.dir, TextsFile, tb.block, len(s.txtChecks))
	}
	c := &s.txtChecks[tb.block]
	c.once.Do(func() { c.err = s.verifyTexts(tb) })
	return c.err
}

// verifyTexts is checkTexts' work.
func (s *Store) verifyTexts(tb *textBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: %s: batch %d: corrupt or truncated data: %v", s.dir, TextsFile, tb.block, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := s.verifyBatch(false, tb.block); err != nil {
		e := s.meta.E
		if j := firstNonFinite32(tb.emb[:tb.n*e]); j >= 0 {
			i := tb.start + j/e
			return fmt.Errorf("%w; the damaged batch holds row %d (text_id %d): embedding[%d] = %v", err, i, s.ids[i], j%e, tb.emb[j])
		}
		return err
	}
	return nil
}
