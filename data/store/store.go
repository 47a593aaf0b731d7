// Package store reads and writes geloattack embedding stores: a directory with tokens.arrow (one
// row per token: text_id, position, token_id, embedding fixed_size_list<float16|float32>[d],
// grouped by text in position order), texts.arrow (one row per text: text_id, n_tokens, text,
// embedding fixed_size_list<float32>[e]) and meta.json, written last. Both Arrow files are IPC
// *file* format, uncompressed, so a reader memory-maps them and touches only the pages it reads.
// meta.json records a CRC-32C of every record batch and of the rest of each file (checksum.go):
// Open verifies the rest, the first read of a batch verifies the batch, Validate verifies all.
package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// tokenBatch is one tokens.arrow record batch, every column a view into the memory map.
type tokenBatch struct {
	block  int   // index of the batch in the file (empty batches are not kept)
	start  int64 // global row of the batch's first row
	n      int
	textID []int64
	pos    []int32
	tok    []int32
	emb16  []uint16  // (n, d) when dtype is float16
	emb32  []float32 // (n, d) when dtype is float32
}

// textBatch is one texts.arrow record batch, every column a view into the memory map.
type textBatch struct {
	block   int // index of the batch in the file (empty batches are not kept)
	start   int // index of the batch's first text
	n       int
	valid   []byte  // validity bitmap of text; nil when no text is null
	nulls   int64   // null count of text as the batch header states it
	offsets []int32 // (n+1) into data
	data    []byte
	emb     []float32 // (n, e)
}

// Store is an open, validated store. It implements data.Corpus; reads are safe for concurrent use
// and allocate nothing. Close unmaps the files: it must not run concurrently with reads, and reads
// after it return errors.
type Store struct {
	dir    string
	meta   Meta
	notes  []string
	unmap  []func() error
	tok    []byte // the mapped files, for checksums
	txt    []byte
	tokens []tokenBatch
	texts  []textBatch

	// Verification of each record batch against its checksum, by index in the file, done once
	// on the first read that touches the batch; nil for stores without checksums.
	tokChecks []batchCheck
	txtChecks []batchCheck

	ids        []int64 // text_id of text i (texts.arrow order)
	nTok       []int32 // n_tokens of text i
	rowStart   []int64 // global tokens.arrow row of text i's first row
	firstBatch []int32 // tokens batch that holds that row
	textBatch  []int32 // texts batch that holds text i
	index      map[int64]int
	closed     atomic.Bool
}

var _ data.Corpus = (*Store)(nil)

// Open maps and validates the store in dir: meta.json, the files' sizes and the checksums of
// everything outside their record batches (schema, footer), both schemas against meta.json, row
// counts, n_tokens against the token rows, tokens grouped by text in position order, and every
// token's text_id present in texts.arrow; in a store with checksums, also that both files list
// the texts in one order, that every batch holds the rows and first and last text_id meta.json
// recorded for it (textorder.go) and, when meta.json has one, the id hash over the text ids and
// the checksums (idhash.go). It reads the id and position columns but no embedding,
// so it costs O(tokens x 16 bytes) whatever d is. A record batch's checksum needs all its bytes,
// so the first read that touches the batch verifies it (Validate verifies them all); reads also
// check what they return for NaN and Inf. A store written before checksums, or before id hashes,
// opens with a note (Notes).
func Open(dir string) (*Store, error) {
	meta, err := readMeta(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	tok, unmapTok, err := mapFile(filepath.Join(dir, TokensFile))
	if err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", dir, TokensFile, err)
	}
	txt, unmapTxt, err := mapFile(filepath.Join(dir, TextsFile))
	if err != nil {
		unmapTok()
		return nil, fmt.Errorf("store %s: %s: %w", dir, TextsFile, err)
	}
	s, err := openVerified(dir, meta, tok, txt)
	if err != nil {
		unmapTok()
		unmapTxt()
		return nil, err
	}
	s.unmap = []func() error{unmapTok, unmapTxt}
	return s, nil
}

// openVerified is openData after the size and frame checks of a store with checksums, so that a
// damaged schema or footer is reported as damage. When such a store still fails to open (damage
// inside a record batch breaks its structure), every batch is verified so that the error names the
// damaged one first. A store without checksums gets its note.
func openVerified(dir string, meta Meta, tok, txt []byte) (*Store, error) {
	cs := meta.Checksums
	if cs != nil {
		if err := verifyFrames(dir, cs, tok, txt); err != nil {
			return nil, err
		}
	}
	s, err := openData(dir, meta, tok, txt)
	if err != nil {
		if cs != nil {
			if cerr := verifyAll(context.Background(), dir, cs, tok, txt); cerr != nil {
				return nil, errors.Join(cerr, fmt.Errorf("(opening it failed: %w)", err))
			}
		}
		return nil, err
	}
	if cs == nil {
		s.notes = append(s.notes, noChecksumsNote(dir))
	} else {
		if meta.IDHash == "" {
			s.notes = append(s.notes, noIDHashNote(dir))
		}
		s.tokChecks = make([]batchCheck, len(cs.Tokens.Batches))
		s.txtChecks = make([]batchCheck, len(cs.Texts.Batches))
	}
	return s, nil
}

// verifyFrames checks both files' sizes and frame checksums, turning a fault on a file truncated
// under the map into an error.
func verifyFrames(dir string, cs *Checksums, tok, txt []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: corrupt or truncated data: %v", dir, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := cs.Tokens.verifyFrame(TokensFile, tok); err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	if err := cs.Texts.verifyFrame(TextsFile, txt); err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	return nil
}

// Notes are remarks about the store that are not errors, one sentence each naming the store, for
// the caller to print: that a store written before checksums is not verified, or that one written
// before id hashes has its text ids checked per batch only.
func (s *Store) Notes() []string { return s.notes }

// openData builds a Store over the bytes of the two Arrow files. Any panic (a bug, or a fault on a
// file truncated under the map) becomes an error rather than a crash.
func openData(dir string, meta Meta, tok, txt []byte) (s *Store, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("store %s: corrupt or truncated data: %v", dir, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if !littleEndianHost() {
		return nil, fmt.Errorf("store %s: stores are little-endian and this machine is not", dir)
	}
	s = &Store{dir: dir, meta: meta, tok: tok, txt: txt}
	if err := s.openTexts(txt); err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", dir, TextsFile, err)
	}
	if err := s.openTokens(tok); err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", dir, TokensFile, err)
	}
	if err := s.linkTokens(); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if err := s.checkWriterIDs(); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if err := s.checkIDHash(); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	return s, nil
}

func littleEndianHost() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// checkSchema compares a file's fields with the names and types a store requires.
func checkSchema(f *arrowFile, names, types []string) error {
	if len(f.fields) != len(names) {
		return fmt.Errorf("schema %s: want %d fields %v", f.schemaString(), len(names), names)
	}
	for i, fl := range f.fields {
		if fl.name != names[i] {
			return fmt.Errorf("schema %s: field %d is %q, want %q", f.schemaString(), i, fl.name, names[i])
		}
		if got := fl.typ.String(); got != types[i] {
			return fmt.Errorf("field %q: want %s, got %s", fl.name, types[i], got)
		}
	}
	return nil
}

// view reinterprets the first n elements of a little-endian buffer as []T without copying.
func view[T int64 | int32 | uint16 | float32](b []byte, n int64, what string) ([]T, error) {
	size := int64(unsafe.Sizeof(*new(T)))
	if n < 0 || n > int64(len(b))/size {
		return nil, fmt.Errorf("%s: buffer of %d bytes cannot hold %d values of %d bytes", what, len(b), n, size)
	}
	if n == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(size) != 0 {
		return nil, fmt.Errorf("%s: buffer is not %d-byte aligned", what, size)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// checkNodes checks a batch's node/buffer counts, per-field lengths, the fixed-size-list child
// length (node 4 = embedding values, width values per row), and that only nullable fields have
// nulls.
func checkNodes(rb recordBatch, i, nbufs int, names []string, width int, nullable int, fileBytes int) error {
	if len(rb.nodes) != 5 || len(rb.bufs) != nbufs {
		return fmt.Errorf("batch %d: %d field nodes and %d buffers, want 5 and %d", i, len(rb.nodes), len(rb.bufs), nbufs)
	}
	if rb.rows > int64(fileBytes) {
		return fmt.Errorf("batch %d: %d rows cannot fit a file of %d bytes", i, rb.rows, fileBytes)
	}
	for j := 0; j < 4; j++ {
		if rb.nodes[j].length != rb.rows {
			return fmt.Errorf("batch %d: field %q has %d rows, the batch %d", i, names[j], rb.nodes[j].length, rb.rows)
		}
	}
	if want := rb.rows * int64(width); rb.nodes[4].length != want {
		return fmt.Errorf("batch %d: field \"embedding\": %d values, want %d rows x %d = %d", i, rb.nodes[4].length, rb.rows, width, want)
	}
	for j, nd := range rb.nodes {
		name := "embedding values"
		if j < 4 {
			name = names[j]
		}
		if nd.nulls < 0 || nd.nulls > nd.length || (nd.nulls != 0 && j != nullable) {
			return fmt.Errorf("batch %d: field %q: %d nulls", i, name, nd.nulls)
		}
	}
	return nil
}

var tokenNames = []string{"text_id", "position", "token_id", "embedding"}
var textNames = []string{"text_id", "n_tokens", "text", "embedding"}

func (s *Store) openTokens(buf []byte) error {
	f, err := parseArrowFile(buf)
	if err != nil {
		return err
	}
	d := s.meta.D
	types := []string{"int64", "int32", "int32", fmt.Sprintf("fixed_size_list<%s>[%d]", s.meta.DType, d)}
	if err := checkSchema(f, tokenNames, types); err != nil {
		return err
	}
	var total int64
	s.tokens = make([]tokenBatch, 0, len(f.blocks))
	for i := range f.blocks {
		rb, err := f.batch(i)
		if err != nil {
			return err
		}
		// Buffers: 0 validity, 1 text_id, 2 validity, 3 position, 4 validity, 5 token_id,
		// 6 list validity, 7 values validity, 8 values.
		if err := checkNodes(rb, i, 9, tokenNames, d, -1, len(buf)); err != nil {
			return err
		}
		tb := tokenBatch{block: i, start: total, n: int(rb.rows)}
		where := func(field string) string { return fmt.Sprintf("batch %d: field %q", i, field) }
		if tb.textID, err = view[int64](rb.bufs[1], rb.rows, where("text_id")); err != nil {
			return err
		}
		if tb.pos, err = view[int32](rb.bufs[3], rb.rows, where("position")); err != nil {
			return err
		}
		if tb.tok, err = view[int32](rb.bufs[5], rb.rows, where("token_id")); err != nil {
			return err
		}
		if s.meta.DType == Float16 {
			tb.emb16, err = view[uint16](rb.bufs[8], rb.rows*int64(d), where("embedding"))
		} else {
			tb.emb32, err = view[float32](rb.bufs[8], rb.rows*int64(d), where("embedding"))
		}
		if err != nil {
			return err
		}
		if tb.n > 0 {
			s.tokens = append(s.tokens, tb)
		}
		total += rb.rows
	}
	// linkTokens reads these two columns of every batch next: fetch them all at once.
	for _, tb := range s.tokens {
		willNeed(buf, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tb.textID))), 8*tb.n))
		willNeed(buf, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tb.pos))), 4*tb.n))
	}
	if total != s.meta.NumTokens {
		return fmt.Errorf("%d rows, but meta.json says num_tokens = %d", total, s.meta.NumTokens)
	}
	return nil
}

func (s *Store) openTexts(buf []byte) error {
	f, err := parseArrowFile(buf)
	if err != nil {
		return err
	}
	e := s.meta.E
	types := []string{"int64", "int32", "utf8", fmt.Sprintf("fixed_size_list<float32>[%d]", e)}
	if err := checkSchema(f, textNames, types); err != nil {
		return err
	}
	var total int
	var nTokens int64
	s.index = map[int64]int{}
	for i := range f.blocks {
		rb, err := f.batch(i)
		if err != nil {
			return err
		}
		// Buffers: 0 validity, 1 text_id, 2 validity, 3 n_tokens, 4 text validity, 5 offsets,
		// 6 text bytes, 7 list validity, 8 values validity, 9 values.
		if err := checkNodes(rb, i, 10, textNames, e, 2, len(buf)); err != nil {
			return err
		}
		where := func(field string) string { return fmt.Sprintf("batch %d: field %q", i, field) }
		n := rb.rows
		tb := textBatch{block: i, start: total, n: int(n), data: rb.bufs[6]}
		ids, err := view[int64](rb.bufs[1], n, where("text_id"))
		if err != nil {
			return err
		}
		ntok, err := view[int32](rb.bufs[3], n, where("n_tokens"))
		if err != nil {
			return err
		}
		if tb.offsets, err = view[int32](rb.bufs[5], n+1, where("text")+" offsets"); err != nil {
			return err
		}
		if tb.emb, err = view[float32](rb.bufs[9], n*int64(e), where("embedding")); err != nil {
			return err
		}
		if rb.nodes[2].nulls > 0 {
			if int64(len(rb.bufs[4])) < (n+7)/8 {
				return fmt.Errorf("batch %d: field \"text\": validity bitmap of %d bytes for %d rows", i, len(rb.bufs[4]), n)
			}
			tb.valid = rb.bufs[4]
			tb.nulls = rb.nodes[2].nulls
		}
		for r := 0; r < tb.n; r++ {
			row := total + r
			if o0, o1 := tb.offsets[r], tb.offsets[r+1]; o0 < 0 || o1 < o0 || int(o1) > len(tb.data) {
				return fmt.Errorf("row %d: field \"text\": offsets [%d, %d) outside %d bytes", row, o0, o1, len(tb.data))
			}
			id := ids[r]
			if ntok[r] <= 0 {
				return fmt.Errorf("row %d (text_id %d): n_tokens = %d: a text needs at least one token", row, id, ntok[r])
			}
			if prev, dup := s.index[id]; dup {
				return fmt.Errorf("rows %d and %d: duplicate text_id %d", prev, row, id)
			}
			s.index[id] = row
			nTokens += int64(ntok[r])
		}
		s.ids = append(s.ids, ids...)
		s.nTok = append(s.nTok, ntok...)
		for r := 0; r < tb.n; r++ {
			s.textBatch = append(s.textBatch, int32(len(s.texts)))
		}
		if tb.n > 0 {
			s.texts = append(s.texts, tb)
		}
		total += tb.n
	}
	if int64(total) != s.meta.NumTexts {
		return fmt.Errorf("%d rows, but meta.json says num_texts = %d", total, s.meta.NumTexts)
	}
	if nTokens != s.meta.NumTokens {
		return fmt.Errorf("n_tokens sum to %d, but meta.json says num_tokens = %d", nTokens, s.meta.NumTokens)
	}
	return nil
}

// linkTokens walks the text_id and position columns once: each text's rows must form one run in
// strictly increasing position order, of exactly n_tokens rows, and name a text of texts.arrow.
// The runs may come in any order (stores of other tools); see textorder.go for this writer's.
func (s *Store) linkTokens() error {
	s.rowStart = make([]int64, len(s.ids))
	s.firstBatch = make([]int32, len(s.ids))
	for i := range s.rowStart {
		s.rowStart[i] = -1
	}
	cur, curStart := -1, int64(0)
	var prevPos int32
	endRun := func(end int64) error {
		if cur >= 0 && end-curStart != int64(s.nTok[cur]) {
			return fmt.Errorf("%s: text_id %d has %d rows [%d, %d), but %s says n_tokens = %d",
				TokensFile, s.ids[cur], end-curStart, curStart, end, TextsFile, s.nTok[cur])
		}
		return nil
	}
	for b := range s.tokens {
		tb := &s.tokens[b]
		for r := 0; r < tb.n; r++ {
			row := tb.start + int64(r)
			id, p := tb.textID[r], tb.pos[r]
			if p < 0 {
				return fmt.Errorf("%s: row %d (text_id %d): position %d is negative", TokensFile, row, id, p)
			}
			if cur >= 0 && id == s.ids[cur] {
				if p <= prevPos {
					return fmt.Errorf("%s: row %d (text_id %d): position %d after %d: rows not in position order", TokensFile, row, id, p, prevPos)
				}
				prevPos = p
				continue
			}
			if err := endRun(row); err != nil {
				return err
			}
			idx, ok := s.index[id]
			if !ok {
				return fmt.Errorf("%s: row %d: text_id %d is not in %s", TokensFile, row, id, TextsFile)
			}
			if s.rowStart[idx] >= 0 {
				return fmt.Errorf("%s: row %d: text_id %d appears again after its rows from row %d: tokens not grouped by text",
					TokensFile, row, id, s.rowStart[idx])
			}
			s.rowStart[idx], s.firstBatch[idx] = row, int32(b)
			cur, curStart, prevPos = idx, row, p
		}
	}
	if err := endRun(s.meta.NumTokens); err != nil {
		return err
	}
	for i, r := range s.rowStart {
		if r < 0 {
			return fmt.Errorf("%s: text_id %d has no rows in %s", TextsFile, s.ids[i], TokensFile)
		}
	}
	return nil
}

var errClosed = errors.New("store is closed")

// Close unmaps the files.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, u := range s.unmap {
		errs = append(errs, u())
	}
	s.unmap = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store %s: close: %w", s.dir, err)
	}
	return nil
}

// Meta returns the store's meta.json.
func (s *Store) Meta() Meta { return s.meta }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// D is the row width.
func (s *Store) D() int { return s.meta.D }

// E is the candidate embedding width.
func (s *Store) E() int { return s.meta.E }

// NumTexts is the number of texts.
func (s *Store) NumTexts() int { return len(s.ids) }

// NumRows is the number of token rows of the whole store.
func (s *Store) NumRows() int64 { return s.meta.NumTokens }

// TextID is the text_id of text i.
func (s *Store) TextID(i int) int64 { return s.ids[i] }

// NumTokens is the number of rows of text i.
func (s *Store) NumTokens(i int) int { return int(s.nTok[i]) }

// IndexOf returns the index of a text id and whether it exists.
func (s *Store) IndexOf(textID int64) (int, bool) {
	i, ok := s.index[textID]
	return i, ok
}

func (s *Store) checkRange(i, start, n, have, per int) error {
	if s.closed.Load() {
		return fmt.Errorf("store %s: %w", s.dir, errClosed)
	}
	if i < 0 || i >= len(s.ids) {
		return fmt.Errorf("store %s: text index %d out of range [0, %d)", s.dir, i, len(s.ids))
	}
	if start < 0 || n < 0 || start > int(s.nTok[i])-n {
		return fmt.Errorf("store %s: text %d: rows [%d, %d) out of range [0, %d)", s.dir, s.ids[i], start, start+n, s.nTok[i])
	}
	if have < n*per {
		return fmt.Errorf("store %s: text %d: destination holds %d values, need %d", s.dir, s.ids[i], have, n*per)
	}
	return nil
}

// segments calls fn for each run of rows [start, start+n) of text i that lies in one tokens batch,
// with the batch and the run's first row inside it, and stops at fn's first error. A batch is
// verified against its checksum before its first use.
func (s *Store) segments(i, start, n int, fn func(tb *tokenBatch, r0, k int) error) error {
	row := s.rowStart[i] + int64(start)
	b := int(s.firstBatch[i])
	for n > 0 {
		for row >= s.tokens[b].start+int64(s.tokens[b].n) {
			b++
		}
		tb := &s.tokens[b]
		if err := s.checkTokens(tb); err != nil {
			return err
		}
		r0 := int(row - tb.start)
		k := min(n, tb.n-r0)
		if err := fn(tb, r0, k); err != nil {
			return err
		}
		row += int64(k)
		n -= k
	}
	return nil
}

// nonFiniteRow reports a NaN or Inf found while reading text i: value j of the k rows from r0 of
// batch tb (a writer never stores one, so the store is damaged).
func (s *Store) nonFiniteRow(i int, tb *tokenBatch, r0, j int, v float32) error {
	d := s.meta.D
	r := r0 + j/d
	return fmt.Errorf("store %s: text_id %d, position %d (%s row %d): embedding[%d] = %v: the store is damaged; run `geloattack store validate -store %s`",
		s.dir, s.ids[i], tb.pos[r], TokensFile, tb.start+int64(r), j%d, v, s.dir)
}

// Rows copies rows [start, start+n) of text i, converted to float32, into dst: (n, D). The first
// read of a record batch verifies it against its checksum (once; later reads of the batch pay an
// atomic load), so damage is an error naming the store, the file, the batch and its text ids
// before any of its values are used. A NaN or Inf among the rows is an error naming the store, the
// text_id and the position: the writer stores only finite values, so one means damage (in a store
// without checksums, the only check), and it is better reported here than as a NaN loss. The
// check reads the values the copy reads anyway, at a cost too small to measure beside it.
func (s *Store) Rows(i, start, n int, dst []float32) error {
	d := s.meta.D
	if err := s.checkRange(i, start, n, len(dst), d); err != nil {
		return err
	}
	return s.segments(i, start, n, func(tb *tokenBatch, r0, k int) error {
		out := dst[:k*d]
		if tb.emb16 != nil {
			src := tb.emb16[r0*d : (r0+k)*d]
			if j := firstNonFinite16(src); j >= 0 {
				return s.nonFiniteRow(i, tb, r0, j, numfmt.F16ToF32(src[j]))
			}
			out = out[:len(src)]
			for j, h := range src {
				out[j] = numfmt.F16ToF32(h)
			}
		} else {
			copy(out, tb.emb32[r0*d:(r0+k)*d])
			if j := firstNonFinite32(out); j >= 0 {
				return s.nonFiniteRow(i, tb, r0, j, out[j])
			}
		}
		dst = dst[k*d:]
		return nil
	})
}

// RawRows copies rows [start, start+n) of text i as stored into dst, which must match the dtype:
// []uint16 binary16 bit patterns for float16 stores, []float32 for float32 stores. dst: (n, D).
func (s *Store) RawRows(i, start, n int, dst any) error {
	d := s.meta.D
	switch out := dst.(type) {
	case []uint16:
		if s.meta.DType != Float16 {
			return fmt.Errorf("store %s: raw rows of a %s store need []float32, got []uint16", s.dir, s.meta.DType)
		}
		if err := s.checkRange(i, start, n, len(out), d); err != nil {
			return err
		}
		return s.segments(i, start, n, func(tb *tokenBatch, r0, k int) error {
			src := tb.emb16[r0*d : (r0+k)*d]
			if j := firstNonFinite16(src); j >= 0 {
				return s.nonFiniteRow(i, tb, r0, j, numfmt.F16ToF32(src[j]))
			}
			copy(out, src)
			out = out[k*d:]
			return nil
		})
	case []float32:
		if s.meta.DType != Float32 {
			return fmt.Errorf("store %s: raw rows of a %s store need []uint16, got []float32", s.dir, s.meta.DType)
		}
		return s.Rows(i, start, n, out)
	default:
		return fmt.Errorf("store %s: raw rows: unsupported destination %T", s.dir, dst)
	}
}

// TokenIDs copies the token ids of rows [start, start+n) of text i into dst.
func (s *Store) TokenIDs(i, start, n int, dst []int32) error {
	if err := s.checkRange(i, start, n, len(dst), 1); err != nil {
		return err
	}
	return s.segments(i, start, n, func(tb *tokenBatch, r0, k int) error {
		copy(dst, tb.tok[r0:r0+k])
		dst = dst[k:]
		return nil
	})
}

// Positions copies the positions of rows [start, start+n) of text i into dst.
func (s *Store) Positions(i, start, n int, dst []int32) error {
	if err := s.checkRange(i, start, n, len(dst), 1); err != nil {
		return err
	}
	return s.segments(i, start, n, func(tb *tokenBatch, r0, k int) error {
		copy(dst, tb.pos[r0:r0+k])
		dst = dst[k:]
		return nil
	})
}

// textRow returns the batch and in-batch row of text i.
func (s *Store) textRow(i int) (*textBatch, int) {
	tb := &s.texts[s.textBatch[i]]
	return tb, i - tb.start
}

// TextEmbedding copies the candidate embedding of text i into dst (len >= E). Its record batch is
// verified against its checksum on first use, and a NaN or Inf is an error naming the store and
// the text_id, as in Rows.
func (s *Store) TextEmbedding(i int, dst []float32) error {
	e := s.meta.E
	if err := s.checkRange(i, 0, 1, len(dst), e); err != nil {
		return err
	}
	tb, r := s.textRow(i)
	if err := s.checkTexts(tb); err != nil {
		return err
	}
	copy(dst[:e], tb.emb[r*e:(r+1)*e])
	if j := firstNonFinite32(dst[:e]); j >= 0 {
		return fmt.Errorf("store %s: text_id %d (%s row %d): candidate embedding[%d] = %v: the store is damaged; run `geloattack store validate -store %s`",
			s.dir, s.ids[i], TextsFile, i, j, dst[j], s.dir)
	}
	return nil
}

// Text returns the text of text i and whether it is stored (false for null or out of range). It
// does not verify its record batch against the checksum (it has no error to report one with, and
// the text feeds reports, not the model); Validate does.
func (s *Store) Text(i int) (string, bool) {
	if s.closed.Load() || i < 0 || i >= len(s.ids) {
		return "", false
	}
	tb, r := s.textRow(i)
	if tb.valid != nil && tb.valid[r/8]&(1<<(r%8)) == 0 {
		return "", false
	}
	return string(tb.data[tb.offsets[r]:tb.offsets[r+1]]), true
}
