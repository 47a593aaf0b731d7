package assess

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
)

// Prompt is one text put through the deployment.
type Prompt struct {
	// Index is the prompt's place in the assessment (0, 1, ...); ID its id in the source, which
	// decides its split.
	Index int
	ID    int64
	// Tokens are its token ids, BOS first, cut to the batch's tokens per text; Text their text.
	Tokens []int
	Text   string
}

// Tokenizer is what assess needs of the model's tokenizer: the prompts' token ids and their text,
// and what content recovery's embedder checks (extraction.Tokenizer: its vocabulary and hash).
type Tokenizer interface {
	Encode(text string, addSpecial bool) ([]int, error)
	Decode(ids []int) string
	IsSpecial(id int) bool
	VocabSize() int
	Hash() string
}

// Target is what the attacks run against: the attacker's copy of the open weights (the deployer
// runs the same ones), the tokenizer, the prompts and the filler texts.
type Target struct {
	// Model is the decoder as the attacks see it (decode.Llama over models/llama), LM the
	// weights under it (the learned attack embeds candidate texts with them).
	Model decode.Model
	LM    *llama.Model
	// Decoder is Model's forward (the weights placed on its backend once), which content
	// recovery's embedders share.
	Decoder *causallm.Decoder
	// Tok is its tokenizer and TokHash the tokenizer's hash (as stores record it).
	Tok     Tokenizer
	TokHash string
	// Name is the model's name as `store extract` records it (config.json's _name_or_path, else
	// the directory's name) and Architecture config.json's class name: what the learned attack
	// checks its store against.
	Name, Architecture string
	// D is the hidden width, P the fused Q/K/V projection's width (what GELO's offloaded GEMM
	// computes), Blocks the number of blocks.
	D, P, Blocks int
	// KeptRows is the memory budget content recovery's embedders share for the next-token rows
	// they keep (nil: each its own content.NextKeptBytes).
	KeptRows *content.KeptRows
	// Prompts are the val-split texts assessed, in order.
	Prompts []Prompt
	// Fillers are TextsPerCall train-split texts. The sampler draws a batch's texts from the val
	// side of a corpus holding exactly that batch, and it needs a train side as large: the
	// fillers are that side, never drawn, never attacked (presence uses them as decoys).
	Fillers []Prompt
}

// OpenModel loads the decoder directory of d (its config, weights and tokenizer.json) through
// files, for texts of at most d.Batch.TokensPerText tokens, computing on be (nil: a CPU backend
// of the decoder's own). Close releases what it made; be stays the caller's.
func OpenModel(d Deployment, files *safefile.Files, be engine.Backend) (*Target, error) {
	if d.Model == "" {
		return nil, fmt.Errorf("assess: model: required: a Hugging Face decoder directory (-model DIR)")
	}
	if !hf.IsDecoderDir(d.Model) {
		return nil, fmt.Errorf("assess: model %s is not a decoder directory (config.json with a Llama/Mistral/Qwen2/Qwen3ForCausalLM architecture)", d.Model)
	}
	m, err := hf.Load(d.Model, blas.Default())
	if err != nil {
		return nil, fmt.Errorf("assess: model: %w", err)
	}
	tj, tc, err := hf.ReadTokenizer(files, filepath.Join(d.Model, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("assess: model's tokenizer: %w (copy the model's tokenizer.json into %s)", err, d.Model)
	}
	tok, err := bpe.ParseFor(tj, tc, filepath.Join(d.Model, "tokenizer.json"), m.Cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("assess: model's tokenizer: %w", err)
	}
	cfg := m.Cfg
	if d.Batch.TokensPerText >= cfg.MaxPositions {
		return nil, fmt.Errorf("assess: batch.tokens_per_text %d: the model reads at most %d positions, and the attacker needs one more to prove a text's end",
			d.Batch.TokensPerText, cfg.MaxPositions)
	}
	// The attacker's context is one token longer than the prompts: a text's end is proven by
	// refusing every extension by one more token (decode's claim rule), which a context of exactly
	// the prompts' length would leave untried (open, never claimed).
	lm, err := decode.NewLlama(be, m, d.Batch.TokensPerText+1)
	if err != nil {
		return nil, err
	}
	var b runner.Budget
	b.Add(runner.StoredWeights(d.Model, cfg, cfg.Layers)...)
	if lm.Decoder().Converts() {
		// Decoding runs thousands of small passes: 16-bit blocks stay converted while the memory
		// past the weights allows (assess has no finer pre-flight of its own).
		lm.Decoder().KeepConverted(runner.KeepConverted(b, runner.ConvertedWeights(d.Model, cfg, cfg.Layers)))
		_, kept := lm.Decoder().ConvertedBytes()
		b.Add(runner.Part{Name: "float32 blocks kept converted", Bytes: kept})
	}
	// Content recovery keeps claimed texts' next-token rows (V x d each: 0.5 GB at Llama-2-7B's
	// shape) for the grid's settings; every block's embedder shares one budget from the memory
	// left past the weights and the kept conversions, at most content.NextKeptBytes.
	keep := content.NewKeptRows(runner.KeepConverted(b, content.NextKeptBytes))
	return &Target{Model: lm, LM: m, Decoder: lm.Decoder(), Tok: tok, TokHash: tok.Hash(), Name: hf.ModelName(files, d.Model), Architecture: cfg.Architecture,
		D: cfg.Hidden, P: (cfg.Heads + 2*cfg.KVHeads) * cfg.HeadDim, Blocks: cfg.Layers, KeptRows: keep}, nil
}

// Close stops the decoder's own CPU backend, if it made one (a caller's Backend stays open).
func (t *Target) Close() error {
	if c, ok := t.Model.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// LoadPrompts reads the prompts and fillers of a resolved deployment from its texts source:
// the first Count texts (in the source's order) of the val split by the stores' rule
// (data.SplitOf with ValFrac) that tokenize to at least 2 tokens, BOS included, each cut to the
// batch's tokens per text; and the first TextsPerCall such texts of the train split.
func (t *Target) LoadPrompts(ctx context.Context, d Deployment, files *safefile.Files) error {
	src, err := corpus.ReadSource(d.Prompts.Texts, d.Prompts.Corpora)
	if err != nil {
		return fmt.Errorf("assess: prompts: %w", err)
	}
	if err := files.NoteInput(d.Prompts.Texts); err != nil {
		return fmt.Errorf("assess: prompts: %w", err)
	}
	return t.SetPrompts(ctx, d, src.Texts)
}

// SetPrompts picks the prompts and fillers of d from texts, as LoadPrompts describes.
func (t *Target) SetPrompts(ctx context.Context, d Deployment, texts []corpus.Text) error {
	t.Prompts, t.Fillers = nil, nil
	want := d.Prompts.Count
	for _, tx := range texts {
		if len(t.Prompts) == want && len(t.Fillers) == d.Batch.TextsPerCall {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		val := data.SplitOf(tx.ID, d.Prompts.ValFrac) == data.Val
		if (val && len(t.Prompts) == want) || (!val && len(t.Fillers) == d.Batch.TextsPerCall) {
			continue
		}
		enc, err := t.Tok.Encode(tx.Text, true)
		if err != nil {
			return fmt.Errorf("assess: prompts: text %d: %w", tx.ID, err)
		}
		if len(enc) < 2 {
			continue
		}
		enc = enc[:min(len(enc), d.Batch.TokensPerText)]
		p := Prompt{ID: tx.ID, Tokens: enc, Text: t.text(enc)}
		if val {
			p.Index = len(t.Prompts)
			t.Prompts = append(t.Prompts, p)
		} else {
			p.Index = len(t.Fillers)
			t.Fillers = append(t.Fillers, p)
		}
	}
	if len(t.Prompts) < want {
		return fmt.Errorf("assess: prompts: %s holds %d val-split texts of at least 2 tokens (val_frac %v), want prompts.count %d: lower -prompts or name a larger source",
			d.Prompts.Texts, len(t.Prompts), d.Prompts.ValFrac, want)
	}
	if len(t.Fillers) < d.Batch.TextsPerCall {
		return fmt.Errorf("assess: prompts: %s holds %d train-split texts of at least 2 tokens, want %d (the sampler's other side)",
			d.Prompts.Texts, len(t.Fillers), d.Batch.TextsPerCall)
	}
	return nil
}

// text is the text of token ids without the special tokens (BOS).
func (t *Target) text(ids []int) string {
	plain := make([]int, 0, len(ids))
	for _, id := range ids {
		if !t.Tok.IsSpecial(id) {
			plain = append(plain, id)
		}
	}
	return t.Tok.Decode(plain)
}

// Batches is the number of batches of the prompts: texts per call each, the last one shorter
// when the count is not a multiple.
func (t *Target) Batches(perCall int) int { return (len(t.Prompts) + perCall - 1) / perCall }

// Batch is batch b's prompts.
func (t *Target) Batch(perCall, b int) []Prompt {
	lo := b * perCall
	return t.Prompts[lo:min(lo+perCall, len(t.Prompts))]
}
