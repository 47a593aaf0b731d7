package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// testText is one text of a test store.
type testText struct {
	id      int64
	text    string
	hasText bool
	tokens  []int32
	rows    []float32 // (n, d)
	emb     []float32 // (e)
}

// makeTexts draws n texts with 1..maxLen rows of width d, candidate embeddings of width e, some
// null texts and some values that stress float16 (subnormals, large magnitudes, negative zero).
func makeTexts(seed uint64, n, maxLen, d, e int) []testText {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]testText, n)
	for i := range out {
		k := 1 + rng.IntN(maxLen)
		t := testText{id: int64(1000 + 3*i), tokens: make([]int32, k), rows: make([]float32, k*d), emb: make([]float32, e)}
		if i%3 != 0 {
			t.text, t.hasText = "text é "+string(rune('a'+i%26)), true
		}
		for r := range t.tokens {
			t.tokens[r] = int32(rng.IntN(50000))
		}
		for j := range t.rows {
			switch rng.IntN(20) {
			case 0:
				t.rows[j] = float32(rng.NormFloat64() * 1e-6) // subnormal in float16
			case 1:
				t.rows[j] = float32(rng.NormFloat64() * 1e4)
			case 2:
				t.rows[j] = float32(negZero())
			default:
				t.rows[j] = float32(rng.NormFloat64())
			}
		}
		for j := range t.emb {
			t.emb[j] = float32(rng.NormFloat64())
		}
		out[i] = t
	}
	return out
}

func negZero() float64 { z := 0.0; return -z }

// writeStore writes texts through the package's Writer with small batches, so that texts span
// record batches.
func writeStore(t testing.TB, dir string, meta Meta, texts []testText, batchBytes int) {
	t.Helper()
	w, err := Create(dir, meta)
	if err != nil {
		t.Fatal(err)
	}
	w.batchBytes = batchBytes
	for _, x := range texts {
		if err := w.AddText(x.id, x.text, x.hasText, x.tokens, x.rows, x.emb); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawStore describes store files column by column, so tests can write inconsistent ones. It is
// written with arrow-go's builders, independently of Writer.
type rawStore struct {
	meta Meta
	// tokens.arrow
	tokText []int64
	tokPos  []int32
	tokID   []int32
	tokEmb  []uint32 // (rows, width) bit patterns: binary16 in the low half for float16
	// texts.arrow
	txtID   []int64
	txtN    []int32
	txt     []string
	txtNull []bool
	txtEmb  []float32 // (texts, e)
	// file-level knobs (zero values follow meta)
	tokDType   string
	tokWidth   int
	txtWidth   int
	batchRows  int // rows per tokens batch; 0 = one batch
	posType    arrow.DataType
	tokNames   []string
	compressed bool
}

// rawFromTexts lays out texts in the store format.
func rawFromTexts(meta Meta, texts []testText) *rawStore {
	r := &rawStore{meta: meta}
	for _, x := range texts {
		for k := range x.tokens {
			r.tokText = append(r.tokText, x.id)
			r.tokPos = append(r.tokPos, int32(k))
			r.tokID = append(r.tokID, x.tokens[k])
			for _, v := range x.rows[k*meta.D : (k+1)*meta.D] {
				if meta.DType == Float16 {
					r.tokEmb = append(r.tokEmb, uint32(numfmt.F32ToF16(v)))
				} else {
					r.tokEmb = append(r.tokEmb, math.Float32bits(v))
				}
			}
		}
		r.txtID = append(r.txtID, x.id)
		r.txtN = append(r.txtN, int32(len(x.tokens)))
		r.txt = append(r.txt, x.text)
		r.txtNull = append(r.txtNull, !x.hasText)
		r.txtEmb = append(r.txtEmb, x.emb...)
	}
	r.meta.NumTexts, r.meta.NumTokens = int64(len(texts)), int64(len(r.tokText))
	// Raw stores are written without the Writer, so without checksums, as older builds wrote.
	r.meta.FormatVersion = FormatVersion
	return r
}

func (r *rawStore) write(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dtype := r.tokDType
	if dtype == "" {
		dtype = r.meta.DType
	}
	width := r.tokWidth
	if width == 0 {
		width = r.meta.D
	}
	ewidth := r.txtWidth
	if ewidth == 0 {
		ewidth = r.meta.E
	}
	elem := arrow.DataType(arrow.PrimitiveTypes.Float32)
	if dtype == Float16 {
		elem = arrow.FixedWidthTypes.Float16
	}
	posType := r.posType
	if posType == nil {
		posType = arrow.PrimitiveTypes.Int32
	}
	names := r.tokNames
	if names == nil {
		names = []string{"text_id", "position", "token_id", "embedding"}
	}
	tokSchema := arrow.NewSchema([]arrow.Field{
		{Name: names[0], Type: arrow.PrimitiveTypes.Int64},
		{Name: names[1], Type: posType},
		{Name: names[2], Type: arrow.PrimitiveTypes.Int32},
		{Name: names[3], Type: arrow.FixedSizeListOf(int32(width), elem)},
	}, nil)
	rows := len(r.tokText)
	per := r.batchRows
	if per == 0 {
		per = max(rows, 1)
	}
	var recs []arrow.RecordBatch
	for lo := 0; lo < rows; lo += per {
		hi := min(lo+per, rows)
		b := array.NewRecordBuilder(memory.DefaultAllocator, tokSchema)
		for k := lo; k < hi; k++ {
			b.Field(0).(*array.Int64Builder).Append(r.tokText[k])
			if pb, ok := b.Field(1).(*array.Int32Builder); ok {
				pb.Append(r.tokPos[k])
			} else {
				b.Field(1).(*array.Int64Builder).Append(int64(r.tokPos[k]))
			}
			b.Field(2).(*array.Int32Builder).Append(r.tokID[k])
			fb := b.Field(3).(*array.FixedSizeListBuilder)
			fb.Append(true)
			for j := 0; j < width; j++ {
				v := r.tokEmb[(k*width+j)%len(r.tokEmb)]
				if dtype == Float16 {
					fb.ValueBuilder().(*array.Float16Builder).Append(float16.FromBits(uint16(v)))
				} else {
					fb.ValueBuilder().(*array.Float32Builder).Append(math.Float32frombits(v))
				}
			}
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	r.writeFile(t, filepath.Join(dir, TokensFile), tokSchema, recs)

	txtSchema := arrow.NewSchema([]arrow.Field{
		{Name: "text_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n_tokens", Type: arrow.PrimitiveTypes.Int32},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "embedding", Type: arrow.FixedSizeListOf(int32(ewidth), arrow.PrimitiveTypes.Float32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, txtSchema)
	for k := range r.txtID {
		b.Field(0).(*array.Int64Builder).Append(r.txtID[k])
		b.Field(1).(*array.Int32Builder).Append(r.txtN[k])
		if r.txtNull[k] {
			b.Field(2).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.txt[k])
		}
		fb := b.Field(3).(*array.FixedSizeListBuilder)
		fb.Append(true)
		for j := 0; j < ewidth; j++ {
			fb.ValueBuilder().(*array.Float32Builder).Append(r.txtEmb[(k*ewidth+j)%len(r.txtEmb)])
		}
	}
	r.writeFile(t, filepath.Join(dir, TextsFile), txtSchema, []arrow.RecordBatch{b.NewRecordBatch()})
	b.Release()

	raw, err := json.Marshal(r.meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetaFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *rawStore) writeFile(t testing.TB, path string, schema *arrow.Schema, recs []arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := []ipc.Option{ipc.WithSchema(schema)}
	if r.compressed {
		opts = append(opts, ipc.WithLZ4(), ipc.WithMinSpaceSavings(0))
	}
	w, err := ipc.NewFileWriter(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
