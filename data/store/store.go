// Package store reads and writes geloattack embedding stores: a directory with tokens.arrow (one
// row per token: text_id, position, token_id, embedding fixed_size_list<float16|float32>[d],
// grouped by text in position order), texts.arrow (one row per text: text_id, n_tokens, text,
// embedding fixed_size_list<float32>[e]) and meta.json, written last. Both Arrow files are IPC
// *file* format, uncompressed, so a reader memory-maps them and touches only the pages it reads.
package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/gelo-research/geloattack/data"
)

// tokenBatch is one tokens.arrow record batch, every column a view into the memory map.
type tokenBatch struct {
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
	unmap  []func() error
	tokens []tokenBatch
	texts  []textBatch

	ids        []int64 // text_id of text i (texts.arrow order)
	nTok       []int32 // n_tokens of text i
	rowStart   []int64 // global tokens.arrow row of text i's first row
	firstBatch []int32 // tokens batch that holds that row
	textBatch  []int32 // texts batch that holds text i
	index      map[int64]int
	closed     atomic.Bool
}

var _ data.Corpus = (*Store)(nil)

// Open maps and validates the store in dir: meta.json, both schemas against it, row counts,
// n_tokens against the token rows, tokens grouped by text in position order, and every token's
// text_id present in texts.arrow. It reads the id and position columns but no embedding, so it
// costs O(tokens x 16 bytes) whatever d is; NaN/Inf checks need the full scan of Validate.
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
	s, err := openData(dir, meta, tok, txt)
	if err != nil {
		unmapTok()
		unmapTxt()
		return nil, err
	}
	s.unmap = []func() error{unmapTok, unmapTxt}
	return s, nil
}

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
	s = &Store{dir: dir, meta: meta}
	if err := s.openTexts(txt); err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", dir, TextsFile, err)
	}
	if err := s.openTokens(tok); err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", dir, TokensFile, err)
	}
	if err := s.linkTokens(); err != nil {
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
		tb := tokenBatch{start: total, n: int(rb.rows)}
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
		tb := textBatch{start: total, n: int(n), data: rb.bufs[6]}
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
// with the batch and the run's first row inside it.
func (s *Store) segments(i, start, n int, fn func(tb *tokenBatch, r0, k int)) {
	row := s.rowStart[i] + int64(start)
	b := int(s.firstBatch[i])
	for n > 0 {
		for row >= s.tokens[b].start+int64(s.tokens[b].n) {
			b++
		}
		tb := &s.tokens[b]
		r0 := int(row - tb.start)
		k := min(n, tb.n-r0)
		fn(tb, r0, k)
		row += int64(k)
		n -= k
	}
}

// Rows copies rows [start, start+n) of text i, converted to float32, into dst: (n, D).
func (s *Store) Rows(i, start, n int, dst []float32) error {
	d := s.meta.D
	if err := s.checkRange(i, start, n, len(dst), d); err != nil {
		return err
	}
	s.segments(i, start, n, func(tb *tokenBatch, r0, k int) {
		out := dst[:k*d]
		if tb.emb16 != nil {
			src := tb.emb16[r0*d : (r0+k)*d]
			out = out[:len(src)]
			for j, h := range src {
				out[j] = FromFloat16(h)
			}
		} else {
			copy(out, tb.emb32[r0*d:(r0+k)*d])
		}
		dst = dst[k*d:]
	})
	return nil
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
		s.segments(i, start, n, func(tb *tokenBatch, r0, k int) {
			copy(out, tb.emb16[r0*d:(r0+k)*d])
			out = out[k*d:]
		})
	case []float32:
		if s.meta.DType != Float32 {
			return fmt.Errorf("store %s: raw rows of a %s store need []uint16, got []float32", s.dir, s.meta.DType)
		}
		return s.Rows(i, start, n, out)
	default:
		return fmt.Errorf("store %s: raw rows: unsupported destination %T", s.dir, dst)
	}
	return nil
}

// TokenIDs copies the token ids of rows [start, start+n) of text i into dst.
func (s *Store) TokenIDs(i, start, n int, dst []int32) error {
	if err := s.checkRange(i, start, n, len(dst), 1); err != nil {
		return err
	}
	s.segments(i, start, n, func(tb *tokenBatch, r0, k int) {
		copy(dst, tb.tok[r0:r0+k])
		dst = dst[k:]
	})
	return nil
}

// Positions copies the positions of rows [start, start+n) of text i into dst.
func (s *Store) Positions(i, start, n int, dst []int32) error {
	if err := s.checkRange(i, start, n, len(dst), 1); err != nil {
		return err
	}
	s.segments(i, start, n, func(tb *tokenBatch, r0, k int) {
		copy(dst, tb.pos[r0:r0+k])
		dst = dst[k:]
	})
	return nil
}

// textRow returns the batch and in-batch row of text i.
func (s *Store) textRow(i int) (*textBatch, int) {
	tb := &s.texts[s.textBatch[i]]
	return tb, i - tb.start
}

// TextEmbedding copies the candidate embedding of text i into dst (len >= E).
func (s *Store) TextEmbedding(i int, dst []float32) error {
	e := s.meta.E
	if err := s.checkRange(i, 0, 1, len(dst), e); err != nil {
		return err
	}
	tb, r := s.textRow(i)
	copy(dst[:e], tb.emb[r*e:(r+1)*e])
	return nil
}

// Text returns the text of text i and whether it is stored (false for null or out of range).
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
