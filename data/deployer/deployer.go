// Package deployer connects geloattack to an external GELO deployer: a program outside geloattack
// (bench/torch_deploy.py for Llama-family decoders, bench/torch_bert_deploy.py for BERT encoders;
// PyTorch in fp32, bf16 or fp16) that computes a model's hidden-state rows the way the party
// running GELO would, instead of with geloattack's own float32 forward. An encoder's rows are
// Hugging Face's hidden_states[L], written as the Residual point of block L.
//
// The exchange is in formats geloattack already has. geloattack writes the texts' token ids
// (WriteTexts: JSON lines, since the deployer's machine has no tokenizer and the attack must see
// the same ids). The deployer writes one directory of reference-layout .npz files per (point,
// block), which store.ImportNPZ reads unchanged, and a deployer.json saying which stack computed
// them (Info). Import turns one such directory into a store whose text ids are the input's ids.
//
// How far a deployer's rows may lie from geloattack's float32 rows of the same checkpoint is
// internal/fptol.Recompute, fitted on this package's deployer (TestDeployerSweep).
package deployer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"slices"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// Format is the version tag of deployer.json this package reads.
const Format = "geloattack-deployer/1"

// InfoFile is the deployer's record of a run, written last into its output directory: a
// directory without it is an incomplete run.
const InfoFile = "deployer.json"

// Points of the decoder the deployer writes rows of (the names of extraction's decoder points).
const (
	// AttnInput at block L is RMSNorm(h_L)·g_L, block L's input_layernorm output: the rows GELO mixes.
	AttnInput = "attn-input"
	// Residual at L is Hugging Face's hidden_states[L]: block L's input, or at L = layers the final
	// norm's output (a decoder) or the last block's (an encoder).
	Residual = "residual"
)

// Text is one text of the deployer's input.
type Text struct {
	// ID is the text's id in the attacked source; the deployer's files and the imported store
	// carry it as text_id. It must be >= 0 and distinct.
	ID int64
	// Tokens are geloattack's token ids of the text, special tokens included.
	Tokens []int32
	// BOS is how many leading tokens are the tokenizer's special prefix (the deployer leaves their
	// rows out with --drop-bos).
	BOS int
}

// textLine is a Text as one JSON line of the deployer's input.
type textLine struct {
	ID     int64   `json:"id"`
	Tokens []int32 `json:"tokens"`
	BOS    int     `json:"bos"`
}

// WriteTexts writes texts as the deployer's --tokens input: one JSON object per line.
func WriteTexts(w io.Writer, texts []Text) error {
	seen := make(map[int64]bool, len(texts))
	enc := json.NewEncoder(w)
	for i, t := range texts {
		if err := t.check(i, seen); err != nil {
			return err
		}
		if err := enc.Encode(textLine{ID: t.ID, Tokens: t.Tokens, BOS: t.BOS}); err != nil {
			return fmt.Errorf("deployer input: text %d (id %d): %w", i, t.ID, err)
		}
	}
	return nil
}

// ReadTexts reads the deployer's --tokens input (the file's bytes) as WriteTexts writes it, with
// the same checks (ids >= 0 and distinct, tokens present and >= 0, bos within them), no field it
// does not know, one object a line, and at least one text.
func ReadTexts(b []byte) ([]Text, error) {
	var texts []Text
	seen := map[int64]bool{}
	line := 0
	for raw := range bytes.Lines(b) {
		line++
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var x textLine
		if err := dec.Decode(&x); err != nil {
			return nil, fmt.Errorf("deployer input: line %d: %w", line, err)
		}
		if err := endOfJSON(dec); err != nil {
			// A second object on the line would be dropped silently.
			return nil, fmt.Errorf("deployer input: line %d (id %d): %w", line, x.ID, err)
		}
		t := Text{ID: x.ID, Tokens: x.Tokens, BOS: x.BOS}
		if err := t.check(len(texts), seen); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		texts = append(texts, t)
	}
	if len(texts) == 0 {
		return nil, errors.New("deployer input: no texts")
	}
	return texts, nil
}

// endOfJSON fails unless dec has nothing but white space left after the value it decoded.
func endOfJSON(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON object (one object a line, one per file)")
	}
	return nil
}

// check refuses the i-th text of an input whose earlier ids are seen, and records its id.
func (t Text) check(i int, seen map[int64]bool) error {
	switch {
	case t.ID < 0:
		return fmt.Errorf("deployer input: text %d: id %d is negative", i, t.ID)
	case seen[t.ID]:
		return fmt.Errorf("deployer input: text %d: id %d appears twice", i, t.ID)
	case len(t.Tokens) == 0:
		return fmt.Errorf("deployer input: text %d (id %d): no tokens", i, t.ID)
	case t.BOS < 0 || t.BOS > len(t.Tokens):
		return fmt.Errorf("deployer input: text %d (id %d): bos %d outside 0..%d", i, t.ID, t.BOS, len(t.Tokens))
	}
	for p, tok := range t.Tokens {
		if tok < 0 {
			return fmt.Errorf("deployer input: text %d (id %d): tokens[%d] = %d is no token id", i, t.ID, p, tok)
		}
	}
	seen[t.ID] = true
	return nil
}

// Info is deployer.json: which stack computed the rows, from which model and input.
type Info struct {
	Format    string `json:"format"`
	Generator string `json:"generator"`
	// Framework, Torch, Python and NumPy name the software stack.
	Framework string `json:"framework"`
	Torch     string `json:"torch"`
	Python    string `json:"python"`
	NumPy     string `json:"numpy"`
	// Device is the torch device ("cpu", "cuda:0"); DeviceName the hardware.
	Device     string `json:"device"`
	DeviceName string `json:"device_name"`
	Threads    int    `json:"threads"`
	// DType is the compute and storage dtype: fp32, bf16 or fp16.
	DType string `json:"dtype"`
	// Kernels is "emulate" (float32 kernels rounding each output to DType, as CUDA's do) or
	// "native" (torch's own kernels for DType on Device).
	Kernels string `json:"kernels"`
	// Attention is "eager" (transformers' matmul, softmax, matmul, each rounded) or "fused"
	// (FlashAttention-like: float32 inside, rounded probabilities for the P·V product).
	Attention string `json:"attention"`
	// Model is the model directory; ConfigSHA256 the hash of its config.json.
	Model        string   `json:"model"`
	Architecture string   `json:"architecture"`
	ConfigSHA256 string   `json:"config_sha256"`
	WeightDTypes []string `json:"weight_dtypes"`
	Layers       int      `json:"layers"`
	HiddenSize   int      `json:"hidden_size"`
	// Input is the --tokens file the deployer read, and its hash.
	Input       string `json:"input"`
	InputSHA256 string `json:"input_sha256"`
	Texts       int    `json:"texts"`
	Tokens      int64  `json:"tokens"`
	// Points and Blocks say which directories exist: one per point and block, named PointDir.
	Points []string `json:"points"`
	Blocks []int    `json:"blocks"`
	// BOS is store.SpecialKept or store.SpecialDropped (rows masked out of the stores).
	BOS string `json:"bos"`
	// RowsDType is the element type of the .npz rows ("float32": DType's values widened exactly).
	RowsDType string `json:"rows_dtype"`
	// TextEmbedding says how each text's candidate embedding was made.
	TextEmbedding string `json:"text_embedding"`
}

// ReadInfo reads and checks dir/deployer.json, the record of a complete deployer run.
func ReadInfo(dir string) (Info, error) {
	path := filepath.Join(dir, InfoFile)
	raw, err := safefile.Read(path, safefile.DeployerInfo)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Info{}, fmt.Errorf("deployer rows %s: %s missing: not a deployer output, or a run that did not finish", dir, InfoFile)
		}
		return Info{}, fmt.Errorf("deployer rows %s: %w", dir, err)
	}
	var in Info
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a hand-edited typo must not fall back to a default
	if err := dec.Decode(&in); err != nil {
		return Info{}, fmt.Errorf("deployer rows %s: %w", path, err)
	}
	if err := endOfJSON(dec); err != nil {
		return Info{}, fmt.Errorf("deployer rows %s: %w", path, err)
	}
	if err := in.check(); err != nil {
		return Info{}, fmt.Errorf("deployer rows %s: %w", path, err)
	}
	return in, nil
}

func (in Info) check() error {
	switch {
	case in.Format != Format:
		return fmt.Errorf("format %q: this geloattack reads %q", in.Format, Format)
	case !slices.Contains([]string{"fp32", "bf16", "fp16"}, in.DType):
		return fmt.Errorf("dtype %q: want fp32, bf16 or fp16", in.DType)
	case in.Layers < 1 || in.HiddenSize < 1:
		return fmt.Errorf("layers %d, hidden_size %d: want positive", in.Layers, in.HiddenSize)
	case in.Texts < 1:
		return fmt.Errorf("texts %d: want at least one", in.Texts)
	case in.BOS != store.SpecialKept && in.BOS != store.SpecialDropped:
		return fmt.Errorf("bos %q: want %q or %q", in.BOS, store.SpecialKept, store.SpecialDropped)
	case len(in.Points) == 0 || len(in.Blocks) == 0:
		return fmt.Errorf("points %v, blocks %v: want at least one of each", in.Points, in.Blocks)
	}
	// Each point and block once (not every pair: a 1 MiB file of repeated entries would be
	// billions of pairs), every block within every point's range.
	seenP := map[string]bool{}
	for _, p := range in.Points {
		if seenP[p] {
			return fmt.Errorf("points: %q listed twice", p)
		}
		seenP[p] = true
		for _, b := range []int{slices.Min(in.Blocks), slices.Max(in.Blocks)} {
			if err := in.checkBlock(p, b); err != nil {
				return err
			}
		}
	}
	seenB := map[int]bool{}
	for _, b := range in.Blocks {
		if seenB[b] {
			return fmt.Errorf("blocks: %d listed twice", b)
		}
		seenB[b] = true
	}
	return nil
}

// checkBlock says whether point p has rows at block b in a model of in.Layers blocks.
func (in Info) checkBlock(p string, b int) error {
	top := in.Layers // residual: hidden_states[0..layers]
	switch p {
	case AttnInput:
		top = in.Layers - 1
	case Residual:
	default:
		return fmt.Errorf("point %q: want %q or %q", p, AttnInput, Residual)
	}
	if b < 0 || b > top {
		return fmt.Errorf("%s block %d: a %d-block model has them for blocks 0..%d", p, b, in.Layers, top)
	}
	return nil
}

// Stack names what computed the rows, for a run header, e.g.
// "PyTorch 1.13.0 bf16 (emulate kernels, eager attention) on cpu (x86_64 CPU)".
func (in Info) Stack() string {
	return fmt.Sprintf("PyTorch %s %s (%s kernels, %s attention) on %s (%s)",
		in.Torch, in.DType, in.Kernels, in.Attention, in.Device, in.DeviceName)
}

// PointDir returns the directory (under the run's directory dir) of point's rows at block, or an
// error when the run did not write them.
func (in Info) PointDir(dir, point string, block int) (string, error) {
	if err := in.checkBlock(point, block); err != nil {
		return "", fmt.Errorf("deployer rows %s: %w", dir, err)
	}
	if !slices.Contains(in.Points, point) || !slices.Contains(in.Blocks, block) {
		return "", fmt.Errorf("deployer rows %s: no %s rows of block %d (the run wrote %v of blocks %v)", dir, point, block, in.Points, in.Blocks)
	}
	return filepath.Join(dir, fmt.Sprintf("%s.%d", point, block)), nil
}

// CheckModel fails unless the deployer ran the model of modelDir: the same config.json, byte for
// byte (the weights are not hashed: a full checkpoint would take minutes).
func (in Info) CheckModel(modelDir string) error {
	raw, err := safefile.Read(filepath.Join(modelDir, "config.json"), safefile.ModelConfig)
	if err != nil {
		return fmt.Errorf("deployer rows: %w", err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != in.ConfigSHA256 {
		return fmt.Errorf("deployer rows: computed with %s (config.json sha256 %.12s…), not %s (sha256 %.12s…)", in.Model, in.ConfigSHA256, modelDir, got)
	}
	return nil
}

// Import reads point's rows of block from the deployer run in dir into a new store at storeDir
// (store.ImportNPZ: text ids from the file names, i.e. the input's ids; rows the deployer masked
// out as BOS left out, the others at their true positions; float32, lossless). It returns the run's
// Info.
func Import(ctx context.Context, dir, point string, block int, storeDir string) (Info, error) {
	in, err := ReadInfo(dir)
	if err != nil {
		return Info{}, err
	}
	src, err := in.PointDir(dir, point, block)
	if err != nil {
		return in, err
	}
	err = store.ImportNPZ(ctx, src, storeDir, store.ImportOptions{IDs: store.IDsName, Model: in.Model, Layer: block})
	if err != nil {
		return in, fmt.Errorf("deployer rows: %w", err)
	}
	return in, nil
}

// Unit returns the unit round-off of a deployer dtype's storage: 2^-8 for bf16, 2^-11 for fp16,
// 2^-24 for fp32.
func Unit(dtype string) (float64, error) {
	switch dtype {
	case fptol.PrecisionBF16:
		return fptol.BFloat16, nil
	case fptol.PrecisionFP16:
		return fptol.Float16, nil
	case fptol.PrecisionFP32:
		return fptol.Float32, nil
	}
	return 0, fmt.Errorf("deployer dtype %q: want fp32, bf16 or fp16", dtype)
}

// Rows is one point's rows of a deployer run, by block and text id, held in memory for an attack
// that mixes them itself (decode -deployer-rows, recover -deployer-rows).
type Rows struct {
	Info Info
	// byBlock[block][text id] is the text's kept rows.
	byBlock map[int]map[int64]store.NPZRows
	// byTokens[block][tokenKey(tokens)] is the lowest id of the texts of those tokens whose every
	// row was kept (positions 0, 1, ...): Find's index, built once by ReadRows.
	byTokens map[int]map[string]int64
}

// ReadRows reads point's rows of every block in blocks from the deployer run in dir.
func ReadRows(ctx context.Context, dir, point string, blocks []int) (*Rows, error) {
	in, err := ReadInfo(dir)
	if err != nil {
		return nil, err
	}
	r := &Rows{Info: in, byBlock: map[int]map[int64]store.NPZRows{}, byTokens: map[int]map[string]int64{}}
	for _, b := range blocks {
		src, err := in.PointDir(dir, point, b)
		if err != nil {
			return nil, err
		}
		texts, err := store.ReadNPZDir(ctx, src)
		if err != nil {
			return nil, fmt.Errorf("deployer rows: %w", err)
		}
		if len(texts) != in.Texts {
			// The deployer writes one file per text in every point's directory: a file more or
			// less is another run's, or a run cut short.
			return nil, fmt.Errorf("deployer rows %s: %d .npz texts, %s says texts %d: files added or lost since the run", src, len(texts), InfoFile, in.Texts)
		}
		if err := r.add(b, texts); err != nil {
			return nil, fmt.Errorf("deployer rows %s: %w", src, err)
		}
	}
	return r, nil
}

// add holds block's texts and indexes those with every row by their tokens for Find.
func (r *Rows) add(block int, texts []store.NPZRows) error {
	m := make(map[int64]store.NPZRows, len(texts))
	idx := make(map[string]int64, len(texts))
	for _, t := range texts {
		if t.D != r.Info.HiddenSize {
			return fmt.Errorf("text %d: rows of width %d, deployer.json says hidden_size %d", t.ID, t.D, r.Info.HiddenSize)
		}
		if i := slices.IndexFunc(t.Rows, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }); i >= 0 {
			// A non-finite row poisons every product GELO mixes it into; no bound covers it.
			return fmt.Errorf("text %d: embeddings row %d (token %d at position %d) element %d is %v: the deployer's forward overflowed or the file is corrupt",
				t.ID, i/t.D, t.Tokens[i/t.D], t.Positions[i/t.D], i%t.D, t.Rows[i])
		}
		m[t.ID] = t
		if !allRows(t) {
			continue
		}
		key := tokenKey(t.Tokens)
		if id, dup := idx[key]; !dup || t.ID < id {
			idx[key] = t.ID
		}
	}
	r.byBlock[block], r.byTokens[block] = m, idx
	return nil
}

// Text returns text id's rows at block (rows: (len(tokens), d)), checking that the deployer saw
// exactly these tokens at positions 0, 1, ...: every row, none dropped as BOS, for an attack that
// needs the whole text.
func (r *Rows) Text(id int64, tokens []int, block int) ([]float32, error) {
	m, ok := r.byBlock[block]
	if !ok {
		return nil, fmt.Errorf("deployer rows: block %d not read", block)
	}
	t, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("deployer rows: block %d: no rows of text %d (the deployer's input had %d texts; write it from the same -texts and -max-tokens)", block, id, len(m))
	}
	if len(t.Tokens) != len(tokens) {
		return nil, fmt.Errorf("deployer rows: block %d text %d: %d rows for %d tokens (bos %s: rerun the deployer without --drop-bos)", block, id, len(t.Tokens), len(tokens), r.Info.BOS)
	}
	for p, tok := range tokens {
		if t.Positions[p] != int32(p) || t.Tokens[p] != int32(tok) {
			return nil, fmt.Errorf("deployer rows: block %d text %d: row %d is token %d at position %d, the attacker's is token %d at %d", block, id, p, t.Tokens[p], t.Positions[p], tok, p)
		}
	}
	return t.Rows, nil
}

// Find returns the rows at block (rows: (len(tokens), d)) of a text whose tokens are exactly
// tokens, every row kept at positions 0, 1, ..., and that text's id: the lowest such id, since a
// deployer that runs each text alone (batch 1, as bench's deployers do) computes equal tokens'
// rows alike. Unlike Text it asks for no id, so an input that holds each distinct text once (the
// victims of many cells, deduplicated) serves every cell whose victims it holds, and an input
// with a text per victim serves as before.
func (r *Rows) Find(tokens []int, block int) (int64, []float32, error) {
	idx, ok := r.byTokens[block]
	if !ok {
		return 0, nil, fmt.Errorf("deployer rows: block %d not read", block)
	}
	key := make([]int32, len(tokens))
	for i, tok := range tokens {
		if tok < math.MinInt32 || tok > math.MaxInt32 {
			return 0, nil, fmt.Errorf("deployer rows: token %d at position %d is no token id of the run", tok, i)
		}
		key[i] = int32(tok)
	}
	id, ok := idx[tokenKey(key)]
	if !ok {
		hint := ""
		if r.Info.BOS == store.SpecialDropped {
			hint = " (the run dropped its texts' BOS rows: rerun the deployer without --drop-bos)"
		}
		return 0, nil, fmt.Errorf("deployer rows: block %d: none of the run's %d texts is these %d tokens%s", block, len(r.byBlock[block]), len(tokens), hint)
	}
	x, err := r.Text(id, tokens, block)
	return id, x, err
}

// allRows reports whether t holds a row of every token at positions 0, 1, ...: none dropped.
func allRows(t store.NPZRows) bool {
	for p, q := range t.Positions {
		if q != int32(p) {
			return false
		}
	}
	return true
}

// tokenKey is Find's index key of a token sequence: its ids as little-endian bytes.
func tokenKey(tokens []int32) string {
	b := make([]byte, 0, 4*len(tokens))
	for _, id := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return string(b)
}
