package content

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/bert"
)

// Embedder computes hidden-state rows of texts exactly as `geloattack store extract` computed a
// store's: the same model, layer, truncation, special-token handling and row normalisation (all
// read from the store's meta.json), rounded to the store's element type.
type Embedder struct {
	model *bert.Model
	tok   *wordpiece.Tokenizer
	opt   extraction.Options
	fp16  bool // the store holds float16 rows: round like the writer does
	d     int
}

// NewEmbedder checks that model and tok can reproduce the store described by meta and returns the
// embedder that does. It refuses a store whose width differs from the model's hidden size, whose
// layer the model lacks, or whose special-token handling is not recorded. Verify then compares
// re-computed rows with stored ones, which catches a different model of the same shape.
func NewEmbedder(m *bert.Model, tok *wordpiece.Tokenizer, meta store.Meta) (*Embedder, error) {
	if meta.D != m.Hidden() {
		return nil, fmt.Errorf("content: store meta.json d = %d but the model's hidden size is %d: not the store's model", meta.D, m.Hidden())
	}
	if meta.Layer < 0 || meta.Layer > m.NumLayers() {
		return nil, fmt.Errorf("content: store meta.json layer = %d but the model has layers 0..%d", meta.Layer, m.NumLayers())
	}
	if tok.VocabSize() > m.Cfg.VocabSize {
		return nil, fmt.Errorf("content: tokenizer has %d tokens but the model's vocab_size is %d", tok.VocabSize(), m.Cfg.VocabSize)
	}
	var drop bool
	switch meta.SpecialTokens {
	case store.SpecialKept:
	case store.SpecialDropped:
		drop = true
	default:
		return nil, fmt.Errorf("content: store meta.json special_tokens = %q: not recorded, so candidate rows cannot be made like the store's (want %q or %q; rebuild with store extract)",
			meta.SpecialTokens, store.SpecialKept, store.SpecialDropped)
	}
	maxTok := meta.MaxTokens
	if maxTok == 0 || maxTok > m.MaxLen() {
		maxTok = m.MaxLen()
	}
	return &Embedder{
		model: m, tok: tok, d: m.Hidden(),
		opt:  extraction.Options{Layer: meta.Layer, MaxTokens: maxTok, DropSpecial: drop, Norm: meta.Norm},
		fp16: meta.DType == store.Float16,
	}, nil
}

// D is the row width.
func (e *Embedder) D() int { return e.d }

// Layer is the block whose output the rows are (0: the embedding output), so the number of
// transformer blocks a row went through.
func (e *Embedder) Layer() int { return e.opt.Layer }

// StoreRoundoff is the unit round-off of the row type Embed rounds to as the store writer did:
// 2^-11 for a float16 store, 0 for float32 rows (kept as computed).
func (e *Embedder) StoreRoundoff() float64 {
	if e.fp16 {
		return 0x1p-11
	}
	return 0
}

// Tokenizer is the tokenizer the rows are made with.
func (e *Embedder) Tokenizer() *wordpiece.Tokenizer { return e.tok }

// TokenKey identifies text as the forward pass reads it: its token ids, [CLS] and [SEP] included,
// truncated as Embed truncates. Texts of one key have the same rows (an uncased tokenizer reads
// "Smith" and "smith" alike), so no test can tell them apart.
func (e *Embedder) TokenKey(text string) string {
	ids := e.tok.Encode(text, e.opt.MaxTokens)
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return string(b)
}

// Rows holds the hidden-state rows of a list of texts, stacked.
type Rows struct {
	// D is the row width.
	D int
	// Data: (Off[len], D) row-major; text i owns rows [Off[i], Off[i+1]).
	Data []float32
	// Off: (texts+1) the first row of each text, then the total.
	Off []int
	// IDs: per text, the token ids of its stored rows (special tokens included when the store
	// keeps them).
	IDs [][]int32
	// Tokens is the number of tokens through the encoder; Seconds the wall time of the pass.
	Tokens  int64
	Seconds float64
}

// Len is the number of texts.
func (r *Rows) Len() int { return len(r.Off) - 1 }

// Text returns the rows of text i: (Off[i+1]-Off[i], D), aliasing r.Data.
func (r *Rows) Text(i int) []float32 { return r.Data[r.Off[i]*r.D : r.Off[i+1]*r.D] }

// collect is an extraction.Sink that stacks rows.
type collect struct{ r *Rows }

func (c collect) AddText(_ int64, _ string, _ bool, ids []int32, rows, _ []float32) error {
	c.r.Data = append(c.r.Data, rows...)
	c.r.Off = append(c.r.Off, c.r.Off[len(c.r.Off)-1]+len(ids))
	c.r.IDs = append(c.r.IDs, append([]int32(nil), ids...))
	return nil
}

// Embed runs the store's forward pass over texts in batches of batchTokens tokens (0: 4096) on
// workers goroutines (0: GOMAXPROCS), with a progress bar on progress when not nil. Cancelling ctx
// stops it between batches.
func (e *Embedder) Embed(ctx context.Context, texts []string, batchTokens, workers int, progress io.Writer) (*Rows, error) {
	in := make([]corpus.Text, len(texts))
	for i, t := range texts {
		in[i] = corpus.Text{ID: int64(i), Text: t}
	}
	opt := e.opt
	opt.BatchTokens, opt.Workers, opt.Progress = batchTokens, workers, progress
	if opt.BatchTokens == 0 {
		opt.BatchTokens = 4096
	}
	opt.BatchTokens = max(opt.BatchTokens, opt.MaxTokens)
	r := &Rows{D: e.d, Off: []int{0}}
	st, err := extraction.Run(ctx, e.model, e.tok, in, opt, collect{r})
	if err != nil {
		return nil, fmt.Errorf("content: forward pass over %d texts: %w", len(texts), err)
	}
	if e.fp16 {
		store.RoundFloat16(r.Data)
	}
	r.Tokens, r.Seconds = st.Tokens, st.Elapsed.Seconds()
	return r, nil
}

// verifyMaxTokens bounds the length of the store texts Verify re-computes (for speed).
const verifyMaxTokens = 64

// VerifyTol is the largest relative row difference ||stored - recomputed|| / ||stored|| Verify
// accepts: float16 storage alone gives ~3e-4, a different layer or model gives 1e-1 and more.
const VerifyTol = 1e-2

// Verify re-computes up to k texts of st (the first ones with stored text and at most 64 rows) and
// compares their rows with the stored ones. It returns the largest relative row difference and an
// error naming the text when it exceeds VerifyTol: the candidates' rows would not be the store's.
func (e *Embedder) Verify(ctx context.Context, st *store.Store, k int) (float64, error) {
	var texts []string
	var idx []int
	for i := 0; i < st.NumTexts() && len(texts) < k; i++ {
		t, ok := st.Text(i)
		if !ok || st.NumTokens(i) == 0 || st.NumTokens(i) > verifyMaxTokens {
			continue
		}
		texts, idx = append(texts, t), append(idx, i)
	}
	if len(texts) == 0 {
		return 0, fmt.Errorf("content: store %s has no stored text of at most %d tokens to check the model against", st.Dir(), verifyMaxTokens)
	}
	rows, err := e.Embed(ctx, texts, 0, 0, nil)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for j, i := range idx {
		n := st.NumTokens(i)
		if got := rows.Off[j+1] - rows.Off[j]; got != n {
			return 0, fmt.Errorf("content: store text %d (id %d) has %d rows but the model and tokenizer give %d: not the store's model, tokenizer or special-token setting",
				i, st.TextID(i), n, got)
		}
		stored := make([]float32, n*e.d)
		if err := st.Rows(i, 0, n, stored); err != nil {
			return 0, fmt.Errorf("content: reading store text %d: %w", i, err)
		}
		mine := rows.Text(j)
		for r := 0; r < n; r++ {
			var diff, norm float64
			for c := r * e.d; c < (r+1)*e.d; c++ {
				x := float64(stored[c])
				diff += (x - float64(mine[c])) * (x - float64(mine[c]))
				norm += x * x
			}
			rel := math.Sqrt(diff / max(norm, 1e-300))
			worst = max(worst, rel)
			if rel > VerifyTol {
				return worst, fmt.Errorf("content: store text %d (id %d) row %d differs from the re-computed row by %.3g relative (tolerance %g): the model, layer %d or norm %q is not the one the store was built with",
					i, st.TextID(i), r, rel, VerifyTol, e.opt.Layer, e.opt.Norm)
			}
		}
	}
	return worst, nil
}

// SlotRows returns, for each text of r made from template t, the range [lo, hi) of its rows that
// belong to the secret: the rows left after removing the longest common prefix with the template's
// prefix tokens and the longest common suffix with its suffix tokens (special tokens included as
// the store keeps them). A secret whose tokens merge with the template's is still covered, since
// only rows identical in token id to the template's are removed.
func (e *Embedder) SlotRows(t Template, r *Rows) [][2]int {
	pre := e.tok.Encode(t.Prefix(), 0)
	suf := e.tok.Encode(t.Suffix(), 0)
	// Encode frames with [CLS] ... [SEP]: the prefix keeps [CLS], the suffix keeps [SEP].
	pre = pre[:len(pre)-1]
	suf = suf[1:]
	if e.opt.DropSpecial {
		pre, suf = pre[1:], suf[:len(suf)-1]
	}
	out := make([][2]int, r.Len())
	for i, ids := range r.IDs {
		lo := 0
		for lo < len(ids) && lo < len(pre) && ids[lo] == pre[lo] {
			lo++
		}
		hi := len(ids)
		for k := 1; hi > lo && k <= len(suf) && ids[hi-1] == suf[len(suf)-k]; k++ {
			hi--
		}
		if hi == lo { // the secret added no token of its own: score every row
			lo, hi = 0, len(ids)
		}
		out[i] = [2]int{lo, hi}
	}
	return out
}
