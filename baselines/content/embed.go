package content

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
)

// Embedder computes hidden-state rows of texts exactly as `geloattack store extract` computed a
// store's: the same model, layer (and, for a decoder, point), truncation, special-token handling
// and row normalisation (all read from the store's meta.json), rounded to the store's element
// type. The forward pass is the store's encoder (NewEmbedder) or causal decoder
// (NewDecoderEmbedder).
type Embedder struct {
	fwd   rowModel
	fp16  bool // the store holds float16 rows: round like the writer does
	d     int
	layer int
	// first are a decoder's next-token rows at layer 0, where they are every text's (nextRows).
	first *nextRowsOf
	// nextKept are a decoder's next-token rows past layer 0 by text, held within keep's bytes
	// (nextRows).
	nextKept map[string]*nextRowsOf
	keep     *KeptRows
}

// rowModel is the forward pass behind an Embedder, run by extraction's code for the store's model.
type rowModel interface {
	// run hands sink the rows of texts, in order, as the store's extraction made them.
	run(ctx context.Context, texts []corpus.Text, batchTokens, workers int, progress io.Writer, sink *collect) (tokens int64, err error)
	// tokens are text's token ids as the pass reads them: special tokens included, truncated.
	tokens(text string) ([]int32, error)
	// slots are, per text of r made by filling t with values[i], the rows [lo, hi) the slot scores
	// read; an error where a value's text has no such rows.
	slots(t Template, values []string, r *Rows) ([][2]int, error)
	// causal says the rows at a position depend on the tokens up to it only (a decoder).
	causal() bool
}

// D is the row width.
func (e *Embedder) D() int { return e.d }

// Layer is the block whose rows these are (0: the embedding output), so the number of
// transformer blocks a row went through.
func (e *Embedder) Layer() int { return e.layer }

// Causal reports a decoder's rows: a text's rows up to a position are those of every text that
// starts with the same tokens, so a template needs text after its slot (CheckTemplate) and a claim
// needs the end-of-text test (CheckEnd).
func (e *Embedder) Causal() bool { return e.fwd.causal() }

// StoreRoundoff is the unit round-off of the row type Embed rounds to as the store writer did:
// 2^-11 for a float16 store, 0 for float32 rows (kept as computed).
func (e *Embedder) StoreRoundoff() float64 {
	if e.fp16 {
		return 0x1p-11
	}
	return 0
}

// TokenKey identifies text as the forward pass reads it: its token ids, special tokens included,
// truncated as Embed truncates. Texts of one key have the same rows (an uncased tokenizer reads
// "Smith" and "smith" alike), so no test can tell them apart. A text the tokenizer refuses gets a
// key of its own, which no token ids have; embedding it then reports the error.
func (e *Embedder) TokenKey(text string) string {
	ids, err := e.fwd.tokens(text)
	if err != nil {
		return "\x00refused:" + text
	}
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
	// Pos: per text, the position of each stored row in the sequence the model ran (a decoder's
	// dropped BOS leaves the first position out).
	Pos [][]int32
	// Tokens is the number of tokens through the model; Seconds the wall time of the pass.
	Tokens  int64
	Seconds float64
}

// Len is the number of texts.
func (r *Rows) Len() int { return len(r.Off) - 1 }

// Text returns the rows of text i: (Off[i+1]-Off[i], D), aliasing r.Data.
func (r *Rows) Text(i int) []float32 { return r.Data[r.Off[i]*r.D : r.Off[i+1]*r.D] }

// collect is the sink of both extraction pipelines (extraction.Sink, extraction.DecoderSink): it
// stacks rows.
type collect struct{ r *Rows }

// AddText stacks a text whose rows sit at positions 0..n-1.
func (c *collect) AddText(id int64, text string, hasText bool, ids []int32, rows, emb []float32) error {
	return c.AddTextAt(id, text, hasText, nil, ids, rows, emb)
}

// AddTextAt stacks a text whose rows sit at positions (nil: 0..n-1).
func (c *collect) AddTextAt(_ int64, _ string, _ bool, positions, ids []int32, rows, _ []float32) error {
	c.r.Data = append(c.r.Data, rows...)
	c.r.Off = append(c.r.Off, c.r.Off[len(c.r.Off)-1]+len(ids))
	c.r.IDs = append(c.r.IDs, append([]int32(nil), ids...))
	pos := append([]int32(nil), positions...)
	if positions == nil {
		pos = make([]int32, len(ids))
		for j := range pos {
			pos[j] = int32(j)
		}
	}
	c.r.Pos = append(c.r.Pos, pos)
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
	if batchTokens == 0 {
		batchTokens = 4096
	}
	r := &Rows{D: e.d, Off: []int{0}}
	t0 := time.Now()
	tokens, err := e.fwd.run(ctx, in, batchTokens, workers, progress, &collect{r})
	if err != nil {
		return nil, fmt.Errorf("content: forward pass over %d texts: %w", len(texts), err)
	}
	if r.Len() != len(texts) {
		return nil, fmt.Errorf("content: forward pass over %d texts returned %d", len(texts), r.Len())
	}
	if e.fp16 {
		store.RoundFloat16(r.Data)
	}
	r.Tokens, r.Seconds = tokens, time.Since(t0).Seconds()
	return r, nil
}

// verifyMaxTokens bounds the length of the store texts Verify re-computes (for speed).
const verifyMaxTokens = 64

// VerifyBound is how far Verify lets a stored row lie from e's fresh float32 recomputation of it
// (rho, relative 2-norm): the recomputation error of a deployer of the store's own compute
// precision (meta.json compute_precision as Meta.RecomputePrecision maps it to a deployer's: fp32,
// tf32 as fp16, bf16) through e's layer at its width, both rows rounded to the store's float16
// where it holds float16. It is DefaultRecompute, the bound recover's verdicts allow for a
// deployer, and the one rowspace's -deployer-rows adds for a tf32 or bf16 store's rows: a store
// `store extract -precision bf16` wrote is a bf16 deployer to this check too. A store of another
// layer or model lies 1e-1 and more away.
// A compute_precision this package does not know (a meta.json not from store.Open's check, e.g.
// "fp16" or "fp8") is refused: RecomputePrecision would read it as fp32, the tightest bound.
func (e *Embedder) VerifyBound(meta store.Meta) (Recompute, error) {
	if err := meta.CheckComputePrecision(); err != nil {
		return Recompute{}, fmt.Errorf("content: meta.json compute_precision %q: no recomputation bound for it (%w)", meta.ComputePrecision, err)
	}
	return DefaultRecompute(e, meta.RecomputePrecision())
}

// Verify re-computes up to k texts of st (the first ones with stored text and at most 64 rows) and
// compares their rows with the stored ones, row by row at the same position (a decoder store
// extracted with -dedup exact keeps only some positions). It returns the largest relative row
// difference and an error naming the text when it exceeds VerifyBound(st.Meta()): the candidates'
// rows would not be the store's.
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
	bound, err := e.VerifyBound(st.Meta())
	if err != nil {
		return 0, fmt.Errorf("content: store %s: %w", st.Dir(), err)
	}
	rows, err := e.Embed(ctx, texts, 0, 0, nil)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for j, i := range idx {
		n := st.NumTokens(i)
		pos, ids := make([]int32, n), make([]int32, n)
		if err := st.Positions(i, 0, n, pos); err != nil {
			return 0, fmt.Errorf("content: reading store text %d: %w", i, err)
		}
		if err := st.TokenIDs(i, 0, n, ids); err != nil {
			return 0, fmt.Errorf("content: reading store text %d: %w", i, err)
		}
		at := map[int32]int{} // position -> recomputed row
		for r, p := range rows.Pos[j] {
			at[p] = r
		}
		stored := make([]float32, n*e.d)
		if err := st.Rows(i, 0, n, stored); err != nil {
			return 0, fmt.Errorf("content: reading store text %d: %w", i, err)
		}
		mine := rows.Text(j)
		got := rows.Off[j+1] - rows.Off[j]
		if got != n && !(e.fwd.causal() && got > n) {
			return worst, fmt.Errorf("content: store text %d (id %d) has %d rows but the model and tokenizer give %d: not the store's model, tokenizer or special-token setting",
				i, st.TextID(i), n, got)
		}
		for r := 0; r < n; r++ {
			m, ok := at[pos[r]]
			if !ok || rows.IDs[j][m] != ids[r] {
				return worst, fmt.Errorf("content: store text %d (id %d) row %d is token %d at position %d, which the model and tokenizer do not give there: not the store's model, tokenizer or special-token setting",
					i, st.TextID(i), r, ids[r], pos[r])
			}
			var diff, norm float64
			for c := 0; c < e.d; c++ {
				x, y := float64(stored[r*e.d+c]), float64(mine[m*e.d+c])
				diff += (x - y) * (x - y)
				norm += x * x
			}
			rel := math.Sqrt(diff / max(norm, 1e-300))
			worst = max(worst, rel)
			if rel > bound.Rho {
				return worst, fmt.Errorf("content: store text %d (id %d) row %d differs from the re-computed row by %.3g relative (bound %.3g: meta.json compute_precision %s, %s): the model, layer %d or norm is not the one the store was built with",
					i, st.TextID(i), r, rel, bound.Rho, st.Meta().RowPrecision(), bound.Source(), e.layer)
			}
		}
	}
	return worst, nil
}

// SlotRows returns, for each text of r made by filling template t with values[i], the range
// [lo, hi) of its rows that the slot scores read. For an encoder, the secret's own rows: those
// left after removing the longest common prefix with the template's prefix tokens and the longest
// common suffix with its suffix tokens (special tokens as the store keeps them). For a decoder,
// from the secret's first row to the end of the text: a causal model's rows up to the secret's
// end are those of every longer secret that starts like it ("1603" inside "16037"), and only the
// rows after it, which read the whole fill, tell the two apart; a text with no row after the
// secret is refused.
func (e *Embedder) SlotRows(t Template, values []string, r *Rows) ([][2]int, error) {
	if len(values) != r.Len() {
		return nil, fmt.Errorf("content: %d values for %d texts of rows", len(values), r.Len())
	}
	return e.fwd.slots(t, values, r)
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
