package store

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// How ImportNPZ assigns text ids.
const (
	// IDsAuto takes the number in each file name when every file has one and they are distinct,
	// and the sorted-order index otherwise.
	IDsAuto = "auto"
	// IDsName takes the last run of digits in the file name (text_00042.npz -> 42) and fails when
	// a file has none or two files share one.
	IDsName = "name"
	// IDsSorted numbers the files 0, 1, ... in byte-wise order of their names.
	IDsSorted = "sorted"
)

// ImportOptions controls ImportNPZ.
type ImportOptions struct {
	// Norm picks the hidden states: "raw" reads `embeddings`, "rms" reads `embeddings_rms`.
	// Empty means raw.
	Norm string
	// IDs is IDsAuto (the default when empty), IDsName or IDsSorted.
	IDs string
	// Model and Layer are recorded in meta.json; the npz files do not carry them.
	Model string
	Layer int
	// Progress, when not nil, is called after each file with the files done and the total.
	Progress func(done, total int)
	// Warn, when not nil, receives one line per skipped file (no row with attention_mask 1).
	Warn func(msg string)
}

// ImportNPZ converts a directory of reference-layout .npz files, one per text, into a store in
// outDir. Each file holds token_ids int32[seq], attention_mask int8[seq] (also bool/uint8/int32/
// int64), embeddings float16[seq x d] and optionally embeddings_rms float16[seq x d]; a leading
// batch dimension of 1 is accepted. Rows whose attention_mask is 0 are dropped and the kept rows
// keep their original positions. The import is lossless: float16 values are stored as the same
// binary16 bit patterns (float32 arrays make a float32 store).
//
// The text-level candidate embedding is the optional array `text_embedding` (float32 or float16,
// width e, the same in every file) when the files carry one, and otherwise the L2-normalised mean
// of the text's kept rows, so e = d. Files without a kept row are skipped (reported through Warn).
func ImportNPZ(ctx context.Context, srcDir, outDir string, opts ImportOptions) error {
	if opts.Norm == "" {
		opts.Norm = NormRaw
	}
	if opts.IDs == "" {
		opts.IDs = IDsAuto
	}
	key := "embeddings"
	switch opts.Norm {
	case NormRaw:
	case NormRMS:
		key = "embeddings_rms"
	default:
		return fmt.Errorf("import %s: norm %q: want %q or %q", srcDir, opts.Norm, NormRaw, NormRMS)
	}
	if err := checkNoStore(outDir); err != nil {
		return fmt.Errorf("import %s: %w", srcDir, err)
	}
	files, ids, idSource, err := listNPZ(srcDir, opts.IDs)
	if err != nil {
		return fmt.Errorf("import %s: %w", srcDir, err)
	}
	imp := importer{opts: opts, key: key}
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	// Texts go out in text_id order, so the store reads in the same order whatever the names.
	sort.SliceStable(order, func(a, b int) bool { return ids[order[a]] < ids[order[b]] })
	for k, fi := range order {
		if err := ctx.Err(); err != nil {
			imp.abort()
			return fmt.Errorf("import %s: %w", srcDir, err)
		}
		path := filepath.Join(srcDir, files[fi])
		t, err := readNPZText(path, key)
		if err == nil && t.kept() == 0 {
			if opts.Warn != nil {
				opts.Warn(fmt.Sprintf("import: %s: attention_mask keeps no row; skipped", path))
			}
		} else if err == nil {
			err = imp.add(outDir, ids[fi], t, srcDir, idSource)
		}
		if err != nil {
			imp.abort()
			return fmt.Errorf("import %s: %s: %w", srcDir, files[fi], err)
		}
		if opts.Progress != nil {
			opts.Progress(k+1, len(files))
		}
	}
	if imp.w == nil {
		return fmt.Errorf("import %s: no file kept a row", srcDir)
	}
	return imp.w.Close()
}

// importer creates the store lazily: its d, e and dtype come from the first kept file.
type importer struct {
	opts    ImportOptions
	key     string
	w       *Writer
	textEmb bool // whether the files carry text_embedding
}

func (imp *importer) abort() {
	if imp.w != nil {
		imp.w.Abort()
	}
}

func (imp *importer) add(outDir string, id int64, t npzText, srcDir, idSource string) error {
	if imp.w == nil {
		imp.textEmb = t.textEmb != nil
		e := t.d
		embSource := "L2-normalised mean of kept rows"
		if imp.textEmb {
			e = len(t.textEmb)
			embSource = "npz text_embedding"
		}
		abs, _ := filepath.Abs(srcDir)
		w, err := Create(outDir, Meta{
			Model: imp.opts.Model, Layer: imp.opts.Layer, D: t.d, E: e, DType: t.dtype, Norm: imp.opts.Norm,
			Source: fmt.Sprintf("npz %s (%s; text_id from %s; text embedding: %s)", abs, imp.key, idSource, embSource),
		})
		if err != nil {
			return err
		}
		imp.w = w
	}
	m := imp.w.meta
	switch {
	case t.d != m.D:
		return fmt.Errorf("%s: width %d, earlier files %d", imp.key, t.d, m.D)
	case t.dtype != m.DType:
		return fmt.Errorf("%s: dtype %s, earlier files %s", imp.key, t.dtype, m.DType)
	case (t.textEmb != nil) != imp.textEmb:
		return fmt.Errorf("text_embedding present in some files and not in others")
	}
	emb := t.textEmb
	if emb == nil {
		emb = meanDirection(t.rows, t.d)
	}
	return imp.w.AddTextAt(id, "", false, t.positions, t.tokens, t.rows, emb)
}

// meanDirection returns the L2-normalised mean of rows: (n, d); a zero mean stays zero.
func meanDirection(rows []float32, d int) []float32 {
	n := len(rows) / d
	acc := make([]float64, d)
	for r := 0; r < n; r++ {
		for j, v := range rows[r*d : (r+1)*d] {
			acc[j] += float64(v)
		}
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	out := make([]float32, d)
	if norm == 0 {
		return out
	}
	inv := 1 / math.Sqrt(norm)
	for j, v := range acc {
		out[j] = float32(v * inv)
	}
	return out
}

var digitsRe = regexp.MustCompile(`[0-9]+`)

// listNPZ returns the .npz file names of dir in byte-wise order and their text ids.
func listNPZ(dir, mode string) (names []string, ids []int64, source string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, "", err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".npz") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, nil, "", fmt.Errorf("no .npz files")
	}
	sort.Strings(names)
	sorted := func() ([]int64, string) {
		ids := make([]int64, len(names))
		for i := range ids {
			ids[i] = int64(i)
		}
		return ids, "sorted file-name order"
	}
	switch mode {
	case IDsSorted:
		ids, source = sorted()
		return names, ids, source, nil
	case IDsName, IDsAuto:
	default:
		return nil, nil, "", fmt.Errorf("ids %q: want %q, %q or %q", mode, IDsAuto, IDsName, IDsSorted)
	}
	ids = make([]int64, len(names))
	seen := map[int64]string{}
	for i, name := range names {
		m := digitsRe.FindAllString(strings.TrimSuffix(name, ".npz"), -1)
		var perr error
		if len(m) == 0 {
			perr = fmt.Errorf("%s: no number in the file name to take as text_id", name)
		} else if v, err := strconv.ParseInt(m[len(m)-1], 10, 64); err != nil {
			perr = fmt.Errorf("%s: number %s does not fit int64", name, m[len(m)-1])
		} else if other, dup := seen[v]; dup {
			perr = fmt.Errorf("%s and %s: both name text_id %d", other, name, v)
		} else {
			seen[v] = name
			ids[i] = v
		}
		if perr != nil {
			if mode == IDsName {
				return nil, nil, "", perr
			}
			ids, source = sorted()
			return names, ids, source, nil
		}
	}
	return names, ids, "file-name numbers", nil
}

// npzText is one text read from an npz file, masked rows already dropped.
type npzText struct {
	d         int
	dtype     string
	positions []int32
	tokens    []int32
	rows      []float32 // (kept, d); float16 inputs widened exactly
	textEmb   []float32 // nil when absent
}

func (t npzText) kept() int { return len(t.tokens) }

// readNPZText reads one reference-layout file.
func readNPZText(path, key string) (npzText, error) {
	f, fi, err := safefile.OpenRead(path, safefile.NPZ)
	if err != nil {
		return npzText{}, err
	}
	defer f.Close()
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return npzText{}, err
	}
	entries := map[string]*zip.File{}
	for _, f := range zr.File {
		entries[strings.TrimSuffix(f.Name, ".npy")] = f
	}
	get := func(name string, required bool) (npyArray, bool, error) {
		f, ok := entries[name]
		if !ok {
			if required {
				return npyArray{}, false, fmt.Errorf("array %q missing", name)
			}
			return npyArray{}, false, nil
		}
		a, err := readNPY(f)
		if err != nil {
			return npyArray{}, false, fmt.Errorf("array %q: %w", name, err)
		}
		return a, true, nil
	}
	tokA, _, err := get("token_ids", true)
	if err != nil {
		return npzText{}, err
	}
	maskA, _, err := get("attention_mask", true)
	if err != nil {
		return npzText{}, err
	}
	embA, _, err := get(key, true)
	if err != nil {
		return npzText{}, err
	}
	tembA, hasTemb, err := get("text_embedding", false)
	if err != nil {
		return npzText{}, err
	}

	tokShape, ok := squeezeLeading(tokA.shape, 1)
	if !ok {
		return npzText{}, fmt.Errorf("token_ids: shape %v, want (seq)", tokA.shape)
	}
	seq := tokShape[0]
	tokens, err := intValues(tokA, "token_ids")
	if err != nil {
		return npzText{}, err
	}
	if ms, ok := squeezeLeading(maskA.shape, 1); !ok || ms[0] != seq {
		return npzText{}, fmt.Errorf("attention_mask: shape %v, want (%d)", maskA.shape, seq)
	}
	mask, err := intValues(maskA, "attention_mask")
	if err != nil {
		return npzText{}, err
	}
	es, ok := squeezeLeading(embA.shape, 2)
	if !ok || es[0] != seq || es[1] == 0 {
		return npzText{}, fmt.Errorf("%s: shape %v, want (%d, d)", key, embA.shape, seq)
	}
	t := npzText{d: es[1]}
	switch embA.descr {
	case "<f2":
		t.dtype = Float16
	case "<f4":
		t.dtype = Float32
	default:
		return npzText{}, fmt.Errorf("%s: dtype %s, want <f2 or <f4", key, embA.descr)
	}
	for p := 0; p < seq; p++ {
		if mask[p] == 0 {
			continue
		}
		if tokens[p] < math.MinInt32 || tokens[p] > math.MaxInt32 {
			return npzText{}, fmt.Errorf("token_ids[%d] = %d does not fit int32", p, tokens[p])
		}
		t.positions = append(t.positions, int32(p))
		t.tokens = append(t.tokens, int32(tokens[p]))
		t.rows = appendFloats(t.rows, embA.descr, embA.data, p*t.d, t.d)
	}
	if hasTemb {
		ts, ok := squeezeLeading(tembA.shape, 1)
		if !ok || ts[0] == 0 || (tembA.descr != "<f2" && tembA.descr != "<f4") {
			return npzText{}, fmt.Errorf("text_embedding: shape %v dtype %s, want (e) float16 or float32", tembA.shape, tembA.descr)
		}
		t.textEmb = appendFloats(nil, tembA.descr, tembA.data, 0, ts[0])
	}
	return t, nil
}

// appendFloats widens n values starting at element off of a <f2 or <f4 buffer to float32 and
// appends them to dst.
func appendFloats(dst []float32, descr string, b []byte, off, n int) []float32 {
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	if descr == "<f2" {
		numfmt.F16sFromLE(out, b[2*off:])
	} else {
		numfmt.F32sFromLE(out, b[4*off:])
	}
	return dst[:len(dst)+n]
}

// intValues reads an integer or bool array as int64.
func intValues(a npyArray, name string) ([]int64, error) {
	size := npyItemSize[a.descr]
	n := len(a.data) / size
	out := make([]int64, n)
	for i := range out {
		switch a.descr {
		case "|b1", "|u1":
			out[i] = int64(a.data[i])
		case "|i1":
			out[i] = int64(int8(a.data[i]))
		case "<i4":
			out[i] = int64(int32(binary.LittleEndian.Uint32(a.data[4*i:])))
		case "<i8":
			out[i] = int64(binary.LittleEndian.Uint64(a.data[8*i:]))
		default:
			return nil, fmt.Errorf("%s: dtype %s, want an integer type", name, a.descr)
		}
	}
	return out, nil
}

// NPZRows is one text of a reference-layout .npz file read whole into memory: its kept rows
// (attention_mask 1) with their positions and token ids.
type NPZRows struct {
	// ID is the text id, from the file name's last number.
	ID int64
	// D is the row width.
	D int
	// Positions and Tokens are per kept row.
	Positions, Tokens []int32
	// Rows are the kept rows: (len(Tokens), D), float16 inputs widened exactly.
	Rows []float32
}

// ReadNPZDir reads every .npz text of dir (the layout ImportNPZ reads, `embeddings` rows) into
// memory, text ids from the file names (IDsName: a name without a number, or two files naming one
// id, is an error), in text-id order: for a caller that attacks rows as they are instead of
// through a store. Every file must hold rows of one width.
func ReadNPZDir(ctx context.Context, dir string) ([]NPZRows, error) {
	files, ids, _, err := listNPZ(dir, IDsName)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	out := make([]NPZRows, 0, len(files))
	for i, name := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := readNPZText(filepath.Join(dir, name), "embeddings")
		if err != nil {
			return nil, fmt.Errorf("read %s: %s: %w", dir, name, err)
		}
		if len(out) > 0 && t.d != out[0].D {
			return nil, fmt.Errorf("read %s: %s: rows of width %d, %s's are %d", dir, name, t.d, files[0], out[0].D)
		}
		out = append(out, NPZRows{ID: ids[i], D: t.d, Positions: t.positions, Tokens: t.tokens, Rows: t.rows})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}
