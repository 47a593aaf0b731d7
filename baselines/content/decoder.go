package content

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// decoder is the rowModel of a decoder store (Llama, Mistral, Qwen2, Qwen3): extraction.RunDecoder
// with the store's layer, point, truncation, BOS handling and norm, without dedup (every row of a
// candidate is scored).
type decoder struct {
	m   *llama.Model
	dc  *causallm.Decoder // the forward pass of the next-token rows (NextRows)
	tok extraction.Tokenizer
	opt extraction.DecoderOptions
}

// DecoderPoints maps meta.json's decoder point to the forward pass's.
var DecoderPoints = map[string]llama.Point{llama.Residual.String(): llama.Residual, llama.AttnInput.String(): llama.AttnInput}

// NewDecoderEmbedder checks that m and tok can reproduce the decoder store described by meta
// (`geloattack store extract -model DIR` on a decoder directory) and returns the embedder that
// does. It refuses an encoder store, a width, architecture, point or layer other than the
// model's, and a tokenizer other than the one meta.json records (by hash). Verify then compares
// re-computed rows with stored ones, which catches other weights of the same shape. The forward
// passes run on dc, a decoder of m's weights on the caller's backend (a GPU's, say: embedders of
// several blocks share it, so the weights are placed once), or on a CPU decoder of their own when
// dc is nil.
func NewDecoderEmbedder(m *llama.Model, dc *causallm.Decoder, tok extraction.Tokenizer, meta store.Meta) (*Embedder, error) {
	dm := meta.Decoder
	if dm == nil {
		return nil, fmt.Errorf("content: store meta.json records no decoder extraction (an encoder store, or an import without it): attack it with its encoder, or extract a store with `store extract -model` on the decoder")
	}
	c := m.Cfg
	if meta.D != c.Hidden {
		return nil, fmt.Errorf("content: store meta.json d = %d but the decoder's hidden size is %d: not the store's model", meta.D, c.Hidden)
	}
	if dm.Architecture != c.Architecture {
		return nil, fmt.Errorf("content: store meta.json decoder architecture %q but the model is %q: not the store's model", dm.Architecture, c.Architecture)
	}
	if dm.TokenizerHash != tok.Hash() {
		return nil, fmt.Errorf("content: store meta.json tokenizer_hash %q but the model directory's tokenizer hashes to %q: candidate token ids would not be the store's", dm.TokenizerHash, tok.Hash())
	}
	if tok.VocabSize() > c.VocabSize {
		return nil, fmt.Errorf("content: tokenizer has %d ids but the decoder's vocab_size is %d", tok.VocabSize(), c.VocabSize)
	}
	p, ok := DecoderPoints[dm.Point]
	if !ok {
		return nil, fmt.Errorf("content: store meta.json decoder point %q: want residual or attn-input", dm.Point)
	}
	top := c.Layers
	if p == llama.AttnInput {
		top--
	}
	if meta.Layer < 0 || meta.Layer > top {
		return nil, fmt.Errorf("content: store meta.json layer = %d but %s rows of the decoder exist for layers 0..%d", meta.Layer, dm.Point, top)
	}
	drop, err := dropsSpecial(meta)
	if err != nil {
		return nil, err
	}
	maxTok := meta.MaxTokens
	if maxTok == 0 || maxTok > c.MaxLen() {
		maxTok = min(512, c.MaxLen()) // store extract's default when -max-tokens is left out
	}
	if dc == nil {
		if dc, err = causallm.NewCPUDecoder(m); err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
	} else if dc.Weights() != m {
		return nil, fmt.Errorf("content: the decoder given computes other weights than the model's")
	}
	dec := &decoder{m: m, dc: dc, tok: tok, opt: extraction.DecoderOptions{Layer: meta.Layer, Point: p, MaxTokens: maxTok, DropBOS: drop, Norm: meta.Norm, Decoder: dc}}
	return &Embedder{fwd: dec, d: c.Hidden, layer: meta.Layer, fp16: meta.DType == store.Float16}, nil
}

func (e *decoder) run(ctx context.Context, texts []corpus.Text, batchTokens, workers int, progress io.Writer, sink *collect) (int64, error) {
	opt := e.opt
	opt.BatchTokens, opt.Workers, opt.Progress = batchTokens, workers, progress
	st, err := extraction.RunDecoder(ctx, e.m, e.tok, texts, opt, sink)
	return st.Tokens, err
}

func (e *decoder) tokens(text string) ([]int32, error) {
	ids, err := e.tok.Encode(text, true)
	if err != nil {
		return nil, fmt.Errorf("content: tokenizing %q: %w", text, err)
	}
	out := make([]int32, min(len(ids), e.opt.MaxTokens))
	for i := range out {
		out[i] = int32(ids[i])
	}
	return out, nil
}

func (e *decoder) causal() bool { return true }

// slots run from the secret's first row (after the longest common prefix with the template's
// prefix tokens) to the end of the text. The rows after the secret are those past the longest
// common prefix of the text with prefix+value alone (so a suffix whose first characters merge
// with the secret's last into one token still counts); a text without one is refused: its rows
// would be every longer secret's too.
func (e *decoder) slots(t Template, values []string, r *Rows) ([][2]int, error) {
	pre, err := e.tokens(t.Prefix())
	if err != nil {
		return nil, err
	}
	out := make([][2]int, r.Len())
	for i, ids := range r.IDs {
		full, err := e.tokens(t.Fill(values[i]))
		if err != nil {
			return nil, err
		}
		head, err := e.tokens(t.Prefix() + values[i])
		if err != nil {
			return nil, err
		}
		first := len(full) - len(ids) // the BOS rows the store drops
		if first < 0 || !slices.Equal(full[first:], ids) {
			return nil, fmt.Errorf("content: candidate %q: the forward pass kept tokens %v of %v: not the store's tokenization", values[i], ids, full)
		}
		k := commonPrefix(full, head)
		if k >= len(full) {
			return nil, fmt.Errorf("content: candidate %q: %q has no token after the secret (the template's suffix %q added none, or the %d-token truncation cut it): a causal model's rows up to the secret's end are also the rows of every longer secret that starts like it",
				values[i], t.Fill(values[i]), t.Suffix(), e.opt.MaxTokens)
		}
		lo := min(commonPrefix(full, pre), k)
		out[i] = [2]int{max(lo-first, 0), len(ids)}
	}
	return out, nil
}

// CheckTemplate refuses a template an Embedder cannot attack: for a causal model (Causal), one
// with no text after its slot (CheckCausalTemplate).
func (e *Embedder) CheckTemplate(t Template) error {
	if e.Causal() {
		return CheckCausalTemplate(t)
	}
	return nil
}

// CheckCausalTemplate refuses a template whose slot is last (nothing but white space after it)
// for a decoder: the rows of "my PIN is 1603" are rows of "my PIN is 16037" bit for bit, so with
// nothing after the slot an absent longer secret would pass for every prefix of it; the rows of
// the text after the slot read the whole fill and tell them apart.
func CheckCausalTemplate(t Template) error {
	if strings.TrimSpace(t.Suffix()) == "" {
		return fmt.Errorf("template %q ends with its slot %s: a decoder's rows up to the secret's end are also the rows of every longer secret that starts like it (\"1603\" inside \"16037\"), so only rows after the slot can tell them apart; the template needs text after %s",
			t.Pattern, Slot, Slot)
	}
	return nil
}
