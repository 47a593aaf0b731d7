package content

import (
	"context"
	"fmt"
	"io"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/bert"
)

// encoder is the rowModel of a BERT-family store: extraction.Run with the store's options.
type encoder struct {
	model *bert.Model
	tok   *wordpiece.Tokenizer
	opt   extraction.Options
}

// NewEmbedder checks that model and tok can reproduce the encoder store described by meta and
// returns the embedder that does. It refuses a store whose width differs from the model's hidden
// size, whose layer the model lacks, whose special-token handling is not recorded, or that a
// decoder wrote. Verify then compares re-computed rows with stored ones, which catches a
// different model of the same shape.
func NewEmbedder(m *bert.Model, tok *wordpiece.Tokenizer, meta store.Meta) (*Embedder, error) {
	if meta.Decoder != nil {
		return nil, fmt.Errorf("content: store meta.json says a %s decoder (%s) wrote it: attack it with that decoder's directory, not an encoder", meta.Decoder.Family, meta.Decoder.Architecture)
	}
	if meta.D != m.Hidden() {
		return nil, fmt.Errorf("content: store meta.json d = %d but the model's hidden size is %d: not the store's model", meta.D, m.Hidden())
	}
	if meta.Layer < 0 || meta.Layer > m.NumLayers() {
		return nil, fmt.Errorf("content: store meta.json layer = %d but the model has layers 0..%d", meta.Layer, m.NumLayers())
	}
	if tok.VocabSize() > m.Cfg.VocabSize {
		return nil, fmt.Errorf("content: tokenizer has %d tokens but the model's vocab_size is %d", tok.VocabSize(), m.Cfg.VocabSize)
	}
	drop, err := dropsSpecial(meta)
	if err != nil {
		return nil, err
	}
	maxTok := meta.MaxTokens
	if maxTok == 0 || maxTok > m.MaxLen() {
		maxTok = m.MaxLen()
	}
	enc := &encoder{model: m, tok: tok, opt: extraction.Options{Layer: meta.Layer, MaxTokens: maxTok, DropSpecial: drop, Norm: meta.Norm}}
	return &Embedder{fwd: enc, d: m.Hidden(), layer: meta.Layer, fp16: meta.DType == store.Float16}, nil
}

// dropsSpecial reads meta.json's special_tokens: whether the store left the special tokens' rows
// out.
func dropsSpecial(meta store.Meta) (bool, error) {
	switch meta.SpecialTokens {
	case store.SpecialKept:
		return false, nil
	case store.SpecialDropped:
		return true, nil
	}
	return false, fmt.Errorf("content: store meta.json special_tokens = %q: not recorded, so candidate rows cannot be made like the store's (want %q or %q; rebuild with store extract)",
		meta.SpecialTokens, store.SpecialKept, store.SpecialDropped)
}

func (e *encoder) run(ctx context.Context, texts []corpus.Text, batchTokens, workers int, progress io.Writer, sink *collect) (int64, error) {
	opt := e.opt
	opt.BatchTokens, opt.Workers, opt.Progress = max(batchTokens, opt.MaxTokens), workers, progress
	st, err := extraction.Run(ctx, e.model, e.tok, texts, opt, sink)
	return st.Tokens, err
}

func (e *encoder) tokens(text string) ([]int32, error) {
	return e.tok.Encode(text, e.opt.MaxTokens), nil
}

func (e *encoder) causal() bool { return false }

// slots are the secret's own rows: what is left after removing the longest common prefix with
// the template's prefix tokens and the longest common suffix with its suffix tokens. A secret
// whose tokens merge with the template's is still covered, since only rows identical in token id
// to the template's are removed.
func (e *encoder) slots(t Template, _ []string, r *Rows) ([][2]int, error) {
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
		lo := commonPrefix(ids, pre)
		hi := len(ids)
		for k := 1; hi > lo && k <= len(suf) && ids[hi-1] == suf[len(suf)-k]; k++ {
			hi--
		}
		if hi == lo { // the secret added no token of its own: score every row
			lo, hi = 0, len(ids)
		}
		out[i] = [2]int{lo, hi}
	}
	return out, nil
}
