package store

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// defaultBatchBytes bounds the embedding bytes of one tokens.arrow record batch, so that neither
// the writer nor a reader of a single batch needs more memory than this.
const defaultBatchBytes = 32 << 20

// float16Overflow is the smallest magnitude that rounds to infinity in float16 (65504 + half an ulp).
const float16Overflow = 65520

// maxTextBatchBytes bounds the text bytes of one texts.arrow record batch (utf8 offsets are int32).
const maxTextBatchBytes = 16 << 20

func tokensSchema(d int, dtype string) *arrow.Schema {
	elem := arrow.DataType(arrow.PrimitiveTypes.Float32)
	if dtype == Float16 {
		elem = arrow.FixedWidthTypes.Float16
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "text_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "position", Type: arrow.PrimitiveTypes.Int32},
		{Name: "token_id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "embedding", Type: arrow.FixedSizeListOf(int32(d), elem)},
	}, nil)
}

func textsSchema(e int) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "text_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n_tokens", Type: arrow.PrimitiveTypes.Int32},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "embedding", Type: arrow.FixedSizeListOf(int32(e), arrow.PrimitiveTypes.Float32)},
	}, nil)
}

// arrowSink is one Arrow IPC file being written under a temporary name.
type arrowSink struct {
	tmp, final string
	f          *os.File
	bw         *bufio.Writer
	w          *ipc.FileWriter
	schema     *arrow.Schema
}

func newArrowSink(dir, name string, schema *arrow.Schema) (*arrowSink, error) {
	s := &arrowSink{
		tmp:    filepath.Join(dir, "."+name+".tmp"),
		final:  filepath.Join(dir, name),
		schema: schema,
	}
	// A link planted at the temporary name would have its target truncated: refuse it.
	f, err := safefile.Create(s.tmp, 0o644)
	if err != nil {
		return nil, err
	}
	s.f = f
	s.bw = bufio.NewWriterSize(f, 1<<20)
	s.w, err = ipc.NewFileWriter(s.bw, ipc.WithSchema(schema))
	if err != nil {
		f.Close()
		os.Remove(s.tmp)
		return nil, err
	}
	return s, nil
}

func (s *arrowSink) write(cols []arrow.Array, rows int) error {
	rec := array.NewRecordBatch(s.schema, cols, int64(rows))
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	return s.w.Write(rec)
}

// finish writes the footer and makes the file durable, still under its temporary name.
func (s *arrowSink) finish() error {
	if err := s.w.Close(); err != nil {
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	err := s.f.Close()
	s.f = nil
	return err
}

func (s *arrowSink) abort() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	os.Remove(s.tmp)
}

// Writer writes a store. Texts are appended one at a time; token rows go out in record batches of
// bounded size, so writing never holds more than one batch in memory. Nothing under the final
// file names exists until Close succeeds, and meta.json is written last: a directory without it is
// an incomplete store. A Writer is not safe for concurrent use.
type Writer struct {
	dir        string
	meta       Meta
	batchBytes int // embedding bytes per tokens batch; tests lower it to exercise many batches
	tokens     *arrowSink
	texts      *arrowSink
	seen       map[int64]struct{}
	ids        *idHasher // the texts so far, in texts.arrow order

	// Pending tokens batch. emb: (rows, D) in the store's dtype, little-endian.
	tIDs  []int64
	tPos  []int32
	tTok  []int32
	tEmb  []byte
	tRows int

	// Pending texts batch. xEmb: (rows, E).
	xIDs   []int64
	xN     []int32
	xValid []byte
	xOff   []int32
	xData  []byte
	xEmb   []float32
	xNulls int

	err  error // first I/O error; the writer is unusable after it
	done bool
}

// Create starts a new store in dir, which may exist but must not hold a store already. meta
// describes the data (Model, Layer, D, E, DType, Norm, Source); counts and versions are filled at
// Close.
func Create(dir string, meta Meta) (*Writer, error) {
	if err := meta.checkShape(); err != nil {
		return nil, fmt.Errorf("store %s: create: %w", dir, err)
	}
	if err := checkNoStore(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store %s: create: %w", dir, err)
	}
	w := &Writer{dir: dir, meta: meta, batchBytes: defaultBatchBytes, seen: map[int64]struct{}{}, ids: newIDHasher()}
	var err error
	if w.tokens, err = newArrowSink(dir, TokensFile, tokensSchema(meta.D, meta.DType)); err != nil {
		return nil, fmt.Errorf("store %s: create %s: %w", dir, TokensFile, err)
	}
	if w.texts, err = newArrowSink(dir, TextsFile, textsSchema(meta.E)); err != nil {
		w.tokens.abort()
		return nil, fmt.Errorf("store %s: create %s: %w", dir, TextsFile, err)
	}
	w.xOff = append(w.xOff, 0)
	return w, nil
}

// SetDecoder records how a decoder store was extracted (written to meta.json at Close).
func (w *Writer) SetDecoder(d DecoderMeta) { w.meta.Decoder = &d }

// AddText appends one text with rows at positions 0..n-1. rows: (n, D) row-major; tokenIDs: (n);
// emb: (E). hasText false stores a null text. Input errors (bad shapes, NaN/Inf, values beyond
// float16, duplicate ids) leave the writer usable; I/O errors do not.
func (w *Writer) AddText(textID int64, text string, hasText bool, tokenIDs []int32, rows []float32, emb []float32) error {
	return w.AddTextAt(textID, text, hasText, nil, tokenIDs, rows, emb)
}

// AddTextAt is AddText with explicit positions, strictly increasing (an importer that drops
// padded rows keeps the original positions); nil means 0..n-1.
func (w *Writer) AddTextAt(textID int64, text string, hasText bool, positions, tokenIDs []int32, rows []float32, emb []float32) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("store %s: text %d: writer already closed", w.dir, textID)
	}
	if err := w.checkText(textID, text, hasText, positions, tokenIDs, rows, emb); err != nil {
		return fmt.Errorf("store %s: text %d: %w", w.dir, textID, err)
	}
	w.seen[textID] = struct{}{}
	n := len(tokenIDs)
	d := w.meta.D
	es := w.meta.elemSize()
	rowBytes := d * es
	for r := 0; r < n; r++ {
		if w.tRows > 0 && (w.tRows+1)*rowBytes > w.batchBytes {
			if err := w.flushTokens(); err != nil {
				return w.fail(err)
			}
		}
		w.tIDs = append(w.tIDs, textID)
		pos := int32(r)
		if positions != nil {
			pos = positions[r]
		}
		w.tPos = append(w.tPos, pos)
		w.tTok = append(w.tTok, tokenIDs[r])
		row := rows[r*d : (r+1)*d]
		off := len(w.tEmb)
		w.tEmb = slices.Grow(w.tEmb, rowBytes)[:off+rowBytes]
		out := w.tEmb[off:]
		if w.meta.DType == Float16 {
			out = out[:2*len(row)]
			for j, v := range row {
				binary.LittleEndian.PutUint16(out[2*j:], numfmt.F32ToF16(v))
			}
		} else {
			out = out[:4*len(row)]
			for j, v := range row {
				binary.LittleEndian.PutUint32(out[4*j:], math.Float32bits(v))
			}
		}
		w.tRows++
	}
	if len(w.xIDs) > 0 && (len(w.xData)+len(text) > maxTextBatchBytes || (len(w.xIDs)+1)*w.meta.E*4 > w.batchBytes) {
		if err := w.flushTexts(); err != nil {
			return w.fail(err)
		}
	}
	i := len(w.xIDs)
	if i%8 == 0 {
		w.xValid = append(w.xValid, 0)
	}
	if hasText {
		w.xValid[i/8] |= 1 << (i % 8)
		w.xData = append(w.xData, text...)
	} else {
		w.xNulls++
	}
	w.xIDs = append(w.xIDs, textID)
	w.xN = append(w.xN, int32(n))
	w.xOff = append(w.xOff, int32(len(w.xData)))
	w.xEmb = append(w.xEmb, emb...)
	w.ids.addText(textID, int32(n))
	w.meta.NumTexts++
	w.meta.NumTokens += int64(n)
	return nil
}

func (w *Writer) checkText(textID int64, text string, hasText bool, positions, tokenIDs []int32, rows, emb []float32) error {
	d, n := w.meta.D, len(tokenIDs)
	if _, dup := w.seen[textID]; dup {
		return fmt.Errorf("duplicate text_id")
	}
	if n == 0 {
		return fmt.Errorf("no tokens: a text needs at least one row")
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("%d tokens: more than int32 n_tokens holds", n)
	}
	if len(rows) != n*d {
		return fmt.Errorf("rows hold %d values, want %d tokens x d=%d = %d", len(rows), n, d, n*d)
	}
	if len(emb) != w.meta.E {
		return fmt.Errorf("embedding has %d values, want e=%d", len(emb), w.meta.E)
	}
	if positions != nil {
		if len(positions) != n {
			return fmt.Errorf("%d positions for %d tokens", len(positions), n)
		}
		for r, p := range positions {
			if p < 0 || (r > 0 && p <= positions[r-1]) {
				return fmt.Errorf("position[%d] = %d: positions must be non-negative and strictly increasing", r, p)
			}
		}
	}
	if hasText && !utf8.ValidString(text) {
		return fmt.Errorf("text is not valid UTF-8")
	}
	if hasText && len(text) > maxTextBatchBytes {
		return fmt.Errorf("text of %d bytes exceeds the %d-byte limit", len(text), maxTextBatchBytes)
	}
	for k, v := range rows {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("row %d: embedding[%d] = %v", k/d, k%d, v)
		}
		if w.meta.DType == Float16 && (v >= float16Overflow || v <= -float16Overflow) {
			return fmt.Errorf("row %d: embedding[%d] = %v overflows float16", k/d, k%d, v)
		}
	}
	for k, v := range emb {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("text embedding[%d] = %v", k, v)
		}
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("store %s: write: %w", w.dir, err)
	}
	return w.err
}

// primitive wraps raw little-endian values as an Arrow array without copying them.
func primitive(t arrow.DataType, n int, values []byte) arrow.ArrayData {
	return array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(values)}, nil, 0, 0)
}

func int64Bytes(v []int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func int32Bytes(v []int32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// fixedSizeList wraps child data as fixed_size_list<elem>[width] of n rows.
func fixedSizeList(t arrow.DataType, n int, child arrow.ArrayData) arrow.Array {
	data := array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	defer data.Release()
	defer child.Release()
	return array.MakeFromData(data)
}

func makeArray(data arrow.ArrayData) arrow.Array {
	defer data.Release()
	return array.MakeFromData(data)
}

func (w *Writer) flushTokens() error {
	if w.tRows == 0 {
		return nil
	}
	n, d := w.tRows, w.meta.D
	schema := w.tokens.schema
	fsl := schema.Field(3).Type.(*arrow.FixedSizeListType)
	cols := []arrow.Array{
		makeArray(primitive(arrow.PrimitiveTypes.Int64, n, int64Bytes(w.tIDs))),
		makeArray(primitive(arrow.PrimitiveTypes.Int32, n, int32Bytes(w.tPos))),
		makeArray(primitive(arrow.PrimitiveTypes.Int32, n, int32Bytes(w.tTok))),
		fixedSizeList(fsl, n, primitive(fsl.Elem(), n*d, w.tEmb)),
	}
	if err := w.tokens.write(cols, n); err != nil {
		return fmt.Errorf("%s: %w", TokensFile, err)
	}
	// The IPC writer has copied the batch to its sink, so the buffers can be reused.
	w.tIDs, w.tPos, w.tTok, w.tEmb, w.tRows = w.tIDs[:0], w.tPos[:0], w.tTok[:0], w.tEmb[:0], 0
	return nil
}

func (w *Writer) flushTexts() error {
	n := len(w.xIDs)
	if n == 0 {
		return nil
	}
	schema := w.texts.schema
	var valid *memory.Buffer
	if w.xNulls > 0 {
		valid = memory.NewBufferBytes(w.xValid)
	}
	text := array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{valid, memory.NewBufferBytes(int32Bytes(w.xOff)), memory.NewBufferBytes(w.xData)}, nil, w.xNulls, 0)
	fsl := schema.Field(3).Type.(*arrow.FixedSizeListType)
	cols := []arrow.Array{
		makeArray(primitive(arrow.PrimitiveTypes.Int64, n, int64Bytes(w.xIDs))),
		makeArray(primitive(arrow.PrimitiveTypes.Int32, n, int32Bytes(w.xN))),
		makeArray(text),
		fixedSizeList(fsl, n, primitive(arrow.PrimitiveTypes.Float32, n*w.meta.E, float32Bytes(w.xEmb))),
	}
	if err := w.texts.write(cols, n); err != nil {
		return fmt.Errorf("%s: %w", TextsFile, err)
	}
	w.xIDs, w.xN, w.xValid, w.xData, w.xEmb, w.xNulls = w.xIDs[:0], w.xN[:0], w.xValid[:0], w.xData[:0], w.xEmb[:0], 0
	w.xOff = append(w.xOff[:0], 0)
	return nil
}

// Close flushes the last batches, computes the files' checksums (see Checksums), moves the files
// to their final names and writes meta.json, with the checksums and the id hash (idhash.go), last. A writer given no text
// fails with ErrEmpty, as Open would on the store. On error the temporary files are removed and
// no store is left behind.
func (w *Writer) Close() error {
	if w.done {
		return w.err
	}
	w.done = true
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.meta.NumTexts == 0 {
		// Open refuses such a store (nothing to sample, train on or attack), so writing one
		// would only move the error to whoever reads it next.
		w.err = fmt.Errorf("store %s: close: %w: no text was added, and a store of 0 texts does not open; nothing was written (no %s)",
			w.dir, ErrEmpty, MetaFile)
		w.Abort()
		return w.err
	}
	err := w.flushTokens()
	if err == nil {
		err = w.flushTexts()
	}
	if err == nil {
		err = w.tokens.finish()
	}
	if err == nil {
		err = w.texts.finish()
	}
	var sums *Checksums
	if err == nil {
		// From the files as written, read back through the reader's parser: what Validate
		// checks later is exactly these bytes.
		sums, err = computeChecksums(w.tokens.tmp, w.texts.tmp)
	}
	if err == nil {
		err = os.Rename(w.tokens.tmp, w.tokens.final)
	}
	if err == nil {
		err = os.Rename(w.texts.tmp, w.texts.final)
	}
	if err == nil {
		w.meta.FormatVersion = FormatVersion
		w.meta.ToolVersion = toolVersion()
		w.meta.Checksums = sums
		w.meta.IDHash = w.ids.sum(sums)
		err = writeMetaFile(w.dir, w.meta)
	}
	if err != nil {
		w.err = fmt.Errorf("store %s: close: %w", w.dir, err)
		w.Abort()
		os.Remove(w.tokens.final)
		os.Remove(w.texts.final)
		return w.err
	}
	return nil
}

// Abort discards everything written so far. Calling it after a successful Close does nothing.
func (w *Writer) Abort() {
	if w.done && w.err == nil {
		return
	}
	w.done = true
	if w.err == nil {
		w.err = errors.New("store writer aborted")
	}
	w.tokens.abort()
	w.texts.abort()
}

// checkNoStore refuses a directory that already holds any file of a store.
func checkNoStore(dir string) error {
	for _, name := range []string{MetaFile, TokensFile, TextsFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("store %s: create: %s already exists; remove the old store first", dir, name)
		}
	}
	return nil
}

// Meta returns the metadata as it stands (counts so far; complete after Close).
func (w *Writer) Meta() Meta { return w.meta }

// writeMetaFile writes meta.json through a temporary file and a rename, then syncs the directory
// so that the rename itself survives a crash.
func writeMetaFile(dir string, m Meta) error {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	raw = append(raw, '\n')
	tmp := filepath.Join(dir, "."+MetaFile+".tmp")
	f, err := safefile.Create(tmp, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(raw); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, MetaFile))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The file is in place; an error here only means the rename's durability is not assured.
	_ = safefile.SyncDir(dir)
	return nil
}
