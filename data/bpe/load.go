package bpe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Load and Parse read the top level of tokenizer.json and assemble the tokenizer: the BPE model
// (model_bpe.go), the added tokens (added.go), then each component through its registry
// (registry.go), then tokenizer_config.json (config.go).

// fileJSON is the part of tokenizer.json this package reads; components stay raw until their
// "type" is known.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    json.RawMessage `json:"truncation"`
}

type addedJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// loader carries the file names into every error, and what bounds the ids.
type loader struct {
	path    string // tokenizer.json
	cfgPath string // tokenizer_config.json ("" when absent)
	// vocabSize is the model's vocab_size when the tokenizer is read for a model (ParseFor), else 0.
	vocabSize int
	// listed is how many tokens the files list (model.vocab, added_tokens, added_tokens_decoder).
	listed int
}

// idSlack is how far the largest id may run past twice the number of listed tokens. The id table
// (id -> token) is dense, 16 bytes an entry, so an id far beyond the tokens the file lists would
// size a table the file does not pay for (an id of 2^30-1 in a tokenizer of 300 tokens asked for
// 16 GiB). Real tokenizers number their tokens densely; gaps of reserved ids are small.
const idSlack = 1024

// checkID refuses an id that no table should be sized by: negative or past 2^30, at or past the
// model's vocab_size (ParseFor), or past twice the listed tokens plus idSlack.
func (l *loader) checkID(id int) error {
	switch {
	case id < 0 || id >= 1<<30:
		return fmt.Errorf("id %d: want 0 .. 2^30-1", id)
	case l.vocabSize > 0 && id >= l.vocabSize:
		return fmt.Errorf("id %d is outside the model's vocabulary (config.json vocab_size = %d): the tokenizer does not belong to this model", id, l.vocabSize)
	case id >= 2*l.listed+idSlack:
		return fmt.Errorf("id %d among %d listed tokens: ids this sparse would size an id table of %d entries (want ids below 2 x tokens + %d = %d)",
			id, l.listed, id+1, idSlack, 2*l.listed+idSlack)
	}
	return nil
}

// errf is a refusal naming the file and the JSON field.
func (l *loader) errf(field, format string, args ...any) error {
	return fmt.Errorf("bpe: %s: %s: %s", l.path, field, fmt.Sprintf(format, args...))
}

// Load reads a tokenizer.json, and the tokenizer_config.json in the same directory when there is
// one (bos/eos tokens, add_bos_token/add_eos_token for Llama tokenizers, extra special tokens).
// Every component it does not implement is refused, naming the file and field.
func Load(path string) (*Tokenizer, error) {
	data, err := safefile.Read(path, safefile.TokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	var cfg *configJSON
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if b, err := safefile.Read(cfgPath, safefile.TokenizerConfig); err == nil {
		cfg = new(configJSON)
		if err := json.Unmarshal(b, cfg); err != nil {
			return nil, fmt.Errorf("bpe: %s: %w", cfgPath, err)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		cfgPath = ""
	} else {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	return parse(data, cfg, &loader{path: path, cfgPath: cfgPath})
}

// Parse builds a tokenizer from tokenizer.json bytes and, optionally, tokenizer_config.json bytes
// (nil: none); name is used in errors in place of a path.
func Parse(tokenizerJSON, tokenizerConfig []byte, name string) (*Tokenizer, error) {
	return parseBytes(tokenizerJSON, tokenizerConfig, &loader{path: name})
}

// ParseFor is Parse for the tokenizer of a model whose embedding has vocabSize rows: an id at or
// past vocabSize, in model.vocab, added_tokens or added_tokens_decoder, is refused before any
// table is sized by it.
func ParseFor(tokenizerJSON, tokenizerConfig []byte, name string, vocabSize int) (*Tokenizer, error) {
	if vocabSize < 1 {
		return nil, fmt.Errorf("bpe: %s: the model's vocab_size %d: want >= 1", name, vocabSize)
	}
	return parseBytes(tokenizerJSON, tokenizerConfig, &loader{path: name, vocabSize: vocabSize})
}

// parseBytes is Parse and ParseFor once the loader is set up.
func parseBytes(tokenizerJSON, tokenizerConfig []byte, l *loader) (*Tokenizer, error) {
	var cfg *configJSON
	if tokenizerConfig != nil {
		l.cfgPath = "tokenizer_config.json"
		cfg = new(configJSON)
		if err := json.Unmarshal(tokenizerConfig, cfg); err != nil {
			return nil, fmt.Errorf("bpe: %s: tokenizer_config.json: %w", l.path, err)
		}
	}
	return parse(tokenizerJSON, cfg, l)
}

// parse assembles the tokenizer in the order each part needs the ones before it: the model and
// added tokens first (components resolve token names against them), tokenizer_config.json last
// (it may replace the post-processor's special tokens).
func parse(data []byte, cfg *configJSON, l *loader) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", l.path, err)
	}
	sum := sha256.Sum256(data)
	t := &Tokenizer{
		path:       l.path,
		hash:       hex.EncodeToString(sum[:]),
		unk:        -1,
		bos:        -1,
		cache:      make(map[string][]int32),
		specialIDs: make(map[int32]bool),
		addedByID:  make(map[int32]addedToken),
	}
	l.listed = len(f.AddedTokens)
	if cfg != nil {
		l.listed += len(cfg.AddedTokensDecoder)
	}
	if isSet(f.Truncation) {
		return nil, l.errf("truncation", "is set; this package encodes whole texts (set it to null)")
	}
	if err := l.model(t, f.Model); err != nil {
		return nil, err
	}
	if err := l.addedTokens(t, f.AddedTokens, cfg); err != nil {
		return nil, err
	}
	b := &build{loader: l, t: t}
	var err error
	if t.normalizer, err = normalizerTypes.read(b, f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	pre, err := preTokenizerTypes.read(b, f.PreTokenizer, "pre_tokenizer")
	if err != nil {
		return nil, err
	}
	t.preTok = preSteps(pre)
	if b.byteLevel {
		t.kind = KindByteLevel
	} else {
		t.kind = KindSentencePiece
		if len(t.preTok) == 0 && mergesStayInWords(t) {
			t.preTok = []preStep{preWords{}.PreTokenize}
		}
	}
	if t.decoder, err = decoderTypes.read(b, f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	post, err := postProcessorTypes.read(b, f.PostProcessor, "post_processor")
	if err != nil {
		return nil, err
	}
	if post != nil {
		t.prefix, t.suffix = post.PostProcess(nil, nil)
	}
	if err := l.config(t, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// isSet reports whether a raw JSON value is present and not null.
func isSet(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}
