package extraction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/schollz/progressbar/v3"
)

// Tokenizer turns text into the token ids of a decoder LLM (data/bpe's tokenizers implement it).
type Tokenizer interface {
	// Encode returns the ids of text; addSpecial adds what the tokenizer's post-processor adds
	// (a BOS for Llama and Mistral, nothing for Qwen).
	Encode(text string, addSpecial bool) ([]int, error)
	// VocabSize is the number of ids the tokenizer can produce.
	VocabSize() int
	// Hash identifies the tokenizer (recorded in meta.json).
	Hash() string
}

// DecoderSink receives extracted texts in input order; a *store.Writer is one. positions are the
// rows' token positions in the sequence the model ran (strictly increasing; rows dropped as BOS
// or duplicates leave gaps). The slices are only valid during the call.
type DecoderSink interface {
	AddTextAt(textID int64, text string, hasText bool, positions, tokenIDs []int32, rows []float32, emb []float32) error
}

// DecoderOptions configures RunDecoder.
type DecoderOptions struct {
	// Layer and Point choose the stored rows: Residual at 0..Layers (Hugging Face's
	// hidden_states[Layer]; Layers is the final norm's output) or AttnInput at 0..Layers-1.
	Layer int
	Point llama.Point
	// MaxTexts keeps only the first MaxTexts texts (0: all).
	MaxTexts int
	// MaxTokens truncates each text to this many tokens, BOS included (0: the model's MaxLen).
	MaxTokens int
	// BatchTokens is the token budget of one forward batch (0: 2048).
	BatchTokens int
	// Workers is the number of goroutines that tokenize (0: GOMAXPROCS); the decoder computes on
	// its backend's workers.
	Workers int
	// DropBOS leaves the rows of the tokenizer's leading special tokens out of the store (they
	// still take part in the forward pass). They are identical for every text: a causal model's
	// first row sees only itself.
	DropBOS bool
	// Norm is NormRaw (default when empty) or NormRMS, applied before dedup.
	Norm string
	// Dedup drops every row whose token prefix (its token and every token before it in its text)
	// was seen earlier in the run. A causal decoder's row at position t is a function of tokens
	// <= t alone, so two such rows are the same row whatever the GEMM kernel or the batch did to
	// their last bits: identity, not a comparison of bits, decides (a bit comparison missed
	// duplicates when OpenBLAS's result depended on the batch's other texts).
	Dedup   bool
	Float16 bool
	// Embedding is the candidate embedding's rows: store.EmbeddingFinal (default when empty:
	// the final norm's, DecoderEmbedding; every block runs) or store.EmbeddingStored (the
	// chosen rows themselves, DecoderEmbeddingStored; the pass stops at them, so the model need
	// hold only DecoderBlocks of them).
	Embedding string
	// Progress, when not nil, receives a progress bar with tokens/s.
	Progress io.Writer
	// Backend runs the decoder (models/causallm.Decoder); nil: a CPU backend of GOMAXPROCS
	// workers, whose results do not depend on that count.
	Backend engine.Backend
	// Decoder, when set, is the decoder of m to run (Backend is then unused) and stays the
	// caller's: one that extracts again and again on a device places the weights once (a device
	// holds a decoder's weights until its backend closes).
	Decoder *causallm.Decoder
}

// DecoderStats summarises a decoder run.
type DecoderStats struct {
	Stats
	// DuplicateRows counts rows dropped by Dedup; DroppedTexts texts left with no row at all
	// (every row a duplicate or BOS), which are not stored.
	DuplicateRows, DroppedTexts int64
	// BOS is store's "kept" or "dropped", or "none" when the tokenizer adds no leading token.
	BOS string
}

// DecoderEmbedding describes the candidate embedding RunDecoder gives each text by default
// (store.EmbeddingFinal).
const DecoderEmbedding = "mean of the final-norm rows (hidden_states[num_layers]) over the text's tokens, BOS excluded, L2-normalised"

// DecoderEmbeddingStored describes the candidate embedding of store.EmbeddingStored: the rule of
// DecoderEmbedding applied to the stored point's rows as the model computes them (before -norm
// and -dedup, so it does not depend on the other texts of the run).
const DecoderEmbeddingStored = "mean of the stored layer's rows (the point and layer of meta.json, before norm and dedup) over the text's tokens, BOS excluded, L2-normalised"

// DecoderEmbeddingOf is the description of embedding (store.EmbeddingFinal or EmbeddingStored;
// empty: final) recorded in meta.json, or an error naming the choices.
func DecoderEmbeddingOf(embedding string) (string, error) {
	switch embedding {
	case "", store.EmbeddingFinal:
		return DecoderEmbedding, nil
	case store.EmbeddingStored:
		return DecoderEmbeddingStored, nil
	}
	return "", fmt.Errorf("candidate embedding %q: want %s or %s", embedding, store.EmbeddingFinal, store.EmbeddingStored)
}

// DecoderBlocks is how many blocks (0..n-1) a decoder of layers blocks must hold to give the rows
// at point p of layer and the candidate embedding: every block for store.EmbeddingFinal (the
// final norm's rows); for EmbeddingStored, the residual of layer L is block L-1's output (L
// blocks; at least one, the loader's minimum, for the embedding output L = 0, and all of them
// with the final norm for L = layers), and the attention input of block L is read inside block L
// (L+1 blocks).
func DecoderBlocks(p llama.Point, layer, layers int, embedding string) int {
	if embedding != store.EmbeddingStored {
		return layers
	}
	n := layer
	if p == llama.AttnInput {
		n = layer + 1
	}
	return min(max(n, 1), layers)
}

// errRowsTaken stops a forward pass once the rows it runs for are taken: the blocks after them
// would compute nothing the extraction keeps.
var errRowsTaken = errors.New("extract: the chosen rows are taken")

// RunDecoder tokenizes texts, runs the decoder over them in batches (each text on its own,
// positions from 0, packed without padding) and hands each text to sink in input order: the rows
// at opt.Point of opt.Layer and the candidate embedding opt.Embedding names (DecoderEmbedding or
// DecoderEmbeddingStored).
func RunDecoder(ctx context.Context, m *llama.Model, tok Tokenizer, texts []corpus.Text, opt DecoderOptions, sink DecoderSink) (DecoderStats, error) {
	c := m.Cfg
	d := c.Hidden
	var st DecoderStats
	if _, err := DecoderEmbeddingOf(opt.Embedding); err != nil {
		return st, fmt.Errorf("extract: %w", err)
	}
	stored := opt.Embedding == store.EmbeddingStored
	top := c.Layers
	if opt.Point == llama.AttnInput {
		top = c.Layers - 1
	} else if opt.Point != llama.Residual {
		return st, fmt.Errorf("extract: point %v: want residual or attn-input", opt.Point)
	}
	if opt.Layer < 0 || opt.Layer > top {
		return st, fmt.Errorf("extract: layer %d: %s rows exist for layers 0..%d", opt.Layer, opt.Point, top)
	}
	if need := DecoderBlocks(opt.Point, opt.Layer, c.Layers, opt.Embedding); m.Blocks() < need {
		why := "the candidate embedding pools the final norm's rows: load every block"
		if stored {
			why = fmt.Sprintf("%s rows of layer %d need blocks 0..%d", opt.Point, opt.Layer, need-1)
		}
		return st, fmt.Errorf("extract: the model holds blocks 0..%d of %d, and %s", m.Blocks()-1, c.Layers, why)
	}
	maxLen := opt.MaxTokens
	if maxLen == 0 {
		maxLen = c.MaxLen()
	}
	if maxLen < 1 || maxLen > c.MaxLen() {
		return st, fmt.Errorf("extract: max tokens %d: want 1..%d (the model's max_position_embeddings or sliding window)", maxLen, c.MaxLen())
	}
	budget := opt.BatchTokens
	if budget == 0 {
		budget = 2048
	}
	budget = max(budget, maxLen)
	norm := opt.Norm
	if norm == "" {
		norm = NormRaw
	}
	if norm != NormRaw && norm != NormRMS {
		return st, fmt.Errorf("extract: norm %q: want %q or %q", norm, NormRaw, NormRMS)
	}
	if tok.VocabSize() > c.VocabSize {
		return st, fmt.Errorf("extract: the tokenizer has %d ids but config.json vocab_size is %d", tok.VocabSize(), c.VocabSize)
	}
	if opt.MaxTexts < 0 {
		return st, fmt.Errorf("extract: max texts %d: want >= 0", opt.MaxTexts)
	}
	if opt.MaxTexts > 0 && opt.MaxTexts < len(texts) {
		texts = texts[:opt.MaxTexts]
	}
	workers := opt.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}

	prefix, err := tok.Encode("", true)
	if err != nil {
		return st, fmt.Errorf("extract: tokenizer: %w", err)
	}
	st.BOS = store.SpecialKept
	if len(prefix) == 0 {
		st.BOS = "none"
	} else if opt.DropBOS {
		st.BOS = store.SpecialDropped
	}
	ids := make([][]int32, len(texts))
	bos := make([]int, len(texts)) // leading special tokens of each text
	errs := make([]error, len(texts))
	truncated := make([]bool, len(texts))
	parallel(workers, len(texts), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			full, err := tok.Encode(texts[i].Text, true)
			if err != nil {
				errs[i] = err
				continue
			}
			if len(full) > maxLen {
				full, truncated[i] = full[:maxLen], true
			}
			out := make([]int32, len(full))
			for j, id := range full {
				if id < 0 || id >= c.VocabSize {
					errs[i] = fmt.Errorf("token %d: id %d outside the model's vocabulary (%d)", j, id, c.VocabSize)
					break
				}
				out[j] = int32(id)
			}
			ids[i] = out
			if len(full) >= len(prefix) && slices.Equal(full[:len(prefix)], prefix) {
				bos[i] = len(prefix)
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			return st, fmt.Errorf("extract: text %d (id %d): %w", i, texts[i].ID, err)
		}
		if len(ids[i]) == 0 {
			return st, fmt.Errorf("extract: text %d (id %d): no tokens", i, texts[i].ID)
		}
		st.Tokens += int64(len(ids[i]))
		if truncated[i] {
			st.Truncated++
		}
	}
	st.Texts = int64(len(texts))

	var bar *progressbar.ProgressBar
	if opt.Progress != nil {
		bar = progressbar.NewOptions64(st.Tokens,
			progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("extract %s %d", opt.Point, opt.Layer)),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("tok"),
			progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(opt.Progress) }),
		)
	}
	dc := opt.Decoder
	if dc == nil {
		if dc, err = causallm.OpenDecoder(opt.Backend, m); err != nil {
			return st, fmt.Errorf("extract: %w", err)
		}
		defer dc.Close()
	} else if dc.Weights() != m {
		return st, fmt.Errorf("extract: the decoder given computes other weights than the model's")
	}
	// The tap reads the stored point and, for the final embedding, the final norm's rows: declared,
	// a GPU brings no other block's rows to the host.
	want := []causallm.TapPoint{{Point: opt.Point, Layer: opt.Layer}}
	if !stored {
		want = append(want, causallm.TapPoint{Point: llama.Residual, Layer: c.Layers})
	}
	defer dc.TapOnly(want...)()
	var offs []int                      // the first row of each text of the batch, then the row count
	hidden := make([]float32, budget*d) // (tokens, d): the chosen rows of one batch
	pooled := make([]float32, budget*d) // (texts, d)
	var batchBOS []int
	tap := func(p llama.Point, layer int, x []float32) error {
		if p == opt.Point && layer == opt.Layer {
			copy(hidden, x)
			if stored {
				meanRows(offs, batchBOS, x, d, pooled)
				return errRowsTaken
			}
		}
		if !stored && p == llama.Residual && layer == c.Layers {
			meanRows(offs, batchBOS, x, d, pooled)
		}
		return nil
	}
	var seen prefixTrie
	var pos, keepTok []int32
	var keepRows []float32
	start := time.Now()
	for lo := 0; lo < len(ids); {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n, hi := 0, lo
		for hi < len(ids) && n+len(ids[hi]) <= budget {
			n += len(ids[hi])
			hi++
		}
		batchBOS = bos[lo:hi]
		offs = append(offs[:0], 0)
		for _, t := range ids[lo:hi] {
			offs = append(offs, offs[len(offs)-1]+len(t))
		}
		if err := dc.Forward(ctx, ids[lo:hi], tap, nil); err != nil && !errors.Is(err, errRowsTaken) {
			return st, fmt.Errorf("extract: texts %d..%d: %w", lo, hi-1, err)
		}
		for i := lo; i < hi; i++ {
			rows := hidden[offs[i-lo]*d : offs[i-lo+1]*d]
			first := 0
			if opt.DropBOS {
				first = bos[i]
			}
			pos, keepTok, keepRows = pos[:0], keepTok[:0], keepRows[:0]
			node := int64(0) // the empty prefix
			for r := 0; r < len(ids[i]); r++ {
				var fresh bool
				if opt.Dedup {
					node, fresh = seen.child(node, ids[i][r])
				}
				if r < first {
					continue // a dropped BOS row still extends the prefix
				}
				row := rows[r*d : (r+1)*d]
				if norm == NormRMS {
					RMSNormalize(row, d)
				}
				if opt.Dedup && !fresh {
					st.DuplicateRows++
					continue
				}
				pos = append(pos, int32(r))
				keepTok = append(keepTok, ids[i][r])
				keepRows = append(keepRows, row...)
			}
			if len(pos) == 0 {
				st.DroppedTexts++
				continue
			}
			emb := pooled[(i-lo)*d : (i-lo+1)*d]
			if err := sink.AddTextAt(texts[i].ID, texts[i].Text, true, pos, keepTok, keepRows, emb); err != nil {
				return st, fmt.Errorf("extract: text %d (id %d): %w", i, texts[i].ID, err)
			}
			st.StoredRows += int64(len(pos))
		}
		if bar != nil {
			_ = bar.Add(n)
		}
		lo = hi
	}
	st.Elapsed = time.Since(start)
	if bar != nil {
		_ = bar.Finish()
	}
	return st, nil
}

// meanRows writes each sequence's mean row over its non-BOS rows (all rows when it has no other),
// L2-normalised, into pooled (nseq, d). x: (n, d); offs: first row of each sequence plus n.
func meanRows(offs, bos []int, x []float32, d int, pooled []float32) {
	for s := 0; s+1 < len(offs); s++ {
		lo, hi := offs[s], offs[s+1]
		if hi-lo > bos[s] {
			lo += bos[s]
		}
		bert.MeanNormalized(x, lo, hi, d, pooled[s*d:(s+1)*d])
	}
}

// prefixTrie names every token prefix seen so far: node 0 is the empty prefix, and child gives the
// node of a prefix extended by one token, saying whether it is new. Exact (no hash collisions),
// one map entry per distinct prefix.
type prefixTrie struct {
	next  map[[2]int64]int64 // (parent node, token) -> node
	nodes int64
}

// child returns the node of parent's prefix followed by tok, and whether that prefix is new.
func (t *prefixTrie) child(parent int64, tok int32) (node int64, fresh bool) {
	if t.next == nil {
		t.next = map[[2]int64]int64{}
	}
	key := [2]int64{parent, int64(tok)}
	if n, ok := t.next[key]; ok {
		return n, false
	}
	t.nodes++
	t.next[key] = t.nodes
	return t.nodes, true
}
