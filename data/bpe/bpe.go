// Package bpe is a byte-pair-encoding tokenizer that reads a Hugging Face tokenizer.json (and the
// tokenizer_config.json beside it) and gives the token ids of the model's own tokenizer, in the two
// forms decoder LLMs use:
//
//   - SentencePiece-style BPE (Llama-2, Mistral): "▁" for spaces (Prepend/Replace normalizers or a
//     Metaspace pre-tokenizer), merges by rank over characters, byte fallback to <0xNN> tokens, unk;
//   - byte-level BPE (Llama-3, Qwen2/3): a Split pre-tokenizer with the model's regex (implemented
//     as hand-written scanners, see pretokenize.go), the GPT-2 byte-to-unicode map, ignore_merges.
//
// Added and special tokens are matched before anything else: in the raw text, or, for those with
// normalized: true, in each section's normalized text (the rule of Hugging Face tokenizers;
// transformers.js matches those in the raw text too, and the three reference files have none).
// The reference the package is tested against is Hugging Face's own Rust tokenizers (through its
// Node binding, npm tokenizers), with transformers.js's tokenizer code (npm @lenml/tokenizers) as
// a second oracle, on the real Llama-2-style (Mistral), Llama-3 and Qwen3 files. Where the two
// differ the Rust library is followed: \s is Unicode White_Space (U+0085 is whitespace, U+FEFF is
// not), \p{L} and \p{N} are Unicode 16.0's (unicode_tables.go), the contractions fold case by
// Unicode, normalizers use Unicode 9.0 data, and an invalid run of <0xNN> tokens decodes to one
// U+FFFD per byte.
// Anything in a tokenizer.json this package does not implement is refused at Load, naming the file
// and the JSON field, so that a tokenizer that loads gives the ids its model was trained with.
package bpe

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Kinds a Tokenizer reports.
const (
	KindSentencePiece = "sentencepiece-bpe"
	KindByteLevel     = "byte-level-bpe"
)

// Tokenizer turns text into token ids and back. It is safe for concurrent use.
type Tokenizer struct {
	path string
	hash string
	kind string

	// vocab maps a token to its id: the model's vocabulary and the added tokens, as the
	// final lookup of transformers.js and tokenizers sees them.
	vocab map[string]int32
	// lowRune[r] is the id of the one-character token string(r) for r < len(lowRune), else -1;
	// it makes the per-character lookup of BPE's initial symbols a table read.
	lowRune []int32
	// tokens[id] is the token of id ("" where no token has that id).
	tokens []string
	// merges maps the pair (left id << 32 | right id) to its rank and the merged token's id.
	merges       map[uint64]merge
	ignoreMerges bool
	byteFallback bool
	byteTok      [256]int32 // id of <0xNN>, -1 where absent
	unk          int32      // -1: none
	fuseUnk      bool

	normalizer normalizer // nil: none
	preTok     []preStep  // the pre-tokenizer's steps (preSteps), in order
	decoder    decoder    // nil: none

	// added holds the added tokens matched in the raw text; addedNorm those with
	// normalized: true, matched in each section's normalized text (as tokenizers does).
	added, addedNorm addedSplitter
	addedByID        map[int32]addedToken
	specialIDs       map[int32]bool
	prefix           []int // ids put before the text when specials are added
	suffix           []int // ids put after it
	bos              int32 // -1: none

	cacheMu sync.Mutex
	cache   map[string][]int32
}

// merge is one merge rule: its rank (lower merges first) and the id of the merged token.
type merge struct {
	rank int32
	id   int32
}

// preStep is one pre-tokenizer's PreTokenize: it maps the pieces so far to new pieces. first is
// whether the section being tokenized starts the text (Metaspace's prepend_scheme "first").
type preStep func(pieces []string, first bool) []string

// cacheCap bounds the piece cache; the cache is emptied when it is full. Pieces longer than
// maxCachedPiece bytes (whole SentencePiece sections, mostly) are not cached: they rarely repeat.
const (
	cacheCap       = 1 << 16
	maxCachedPiece = 256
)

// Kind is "sentencepiece-bpe" or "byte-level-bpe".
func (t *Tokenizer) Kind() string { return t.kind }

// Hash is the hex SHA-256 of the tokenizer.json bytes.
func (t *Tokenizer) Hash() string { return t.hash }

// Path is the tokenizer.json the tokenizer was loaded from.
func (t *Tokenizer) Path() string { return t.path }

// VocabSize is the number of ids, added tokens included (the largest id + 1).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a token (a vocabulary entry or an added token) as it is spelled in
// tokenizer.json (byte-level tokens in their mapped form, e.g. "Ġthe").
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	id, ok := t.vocab[tok]
	return int(id), ok
}

// Token returns the token of an id ("", false when no token has it).
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
		return "", false
	}
	return t.tokens[id], true
}

// BOS returns the beginning-of-sequence token: tokenizer_config.json's bos_token, else the first
// special token the post-processor puts before the text. Whether Encode adds it is the
// post-processor's (and, for Llama tokenizers, add_bos_token's) choice: see AddsBOS.
func (t *Tokenizer) BOS() (int, bool) {
	if t.bos < 0 {
		return 0, false
	}
	return int(t.bos), true
}

// AddsBOS reports whether Encode(text, true) starts with the BOS token.
func (t *Tokenizer) AddsBOS() bool {
	return t.bos >= 0 && len(t.prefix) > 0 && t.prefix[0] == int(t.bos)
}

// IsSpecial reports whether id is a special token (added with special: true, or named by
// tokenizer_config.json as a special token).
func (t *Tokenizer) IsSpecial(id int) bool { return t.specialIDs[int32(id)] }

// Encode returns the token ids of text. With addSpecial the post-processor's special tokens (BOS
// for Llama-2/Mistral) are put around them. Special-token strings in the text become their ids.
// Invalid UTF-8 bytes are read as U+FFFD each, as encoding/json sends them to a JSON consumer.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int, error) {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	var out []int
	if addSpecial {
		out = append(out, t.prefix...)
	}
	sections := t.added.split(text)
	var ids []int32
	var pieces []string
	for i, sec := range sections {
		if sec.id >= 0 {
			out = append(out, int(sec.id))
			continue
		}
		s := sec.text
		if s == "" {
			continue
		}
		if t.normalizer != nil {
			s = t.normalizer.Normalize(s)
		}
		if s == "" {
			continue
		}
		ids = ids[:0]
		for j, sub := range t.addedNorm.split(s) {
			if sub.id >= 0 {
				ids = append(ids, sub.id)
				continue
			}
			if sub.text == "" {
				continue
			}
			pieces = append(pieces[:0], sub.text)
			for _, p := range t.preTok {
				pieces = p(pieces, i == 0 && j == 0)
			}
			for _, p := range pieces {
				var err error
				if ids, err = t.encodePiece(p, ids); err != nil {
					return nil, fmt.Errorf("bpe %s: %w", t.path, err)
				}
			}
		}
		if t.fuseUnk && t.unk >= 0 {
			ids = fuse(ids, t.unk)
		}
		for _, id := range ids {
			out = append(out, int(id))
		}
	}
	if addSpecial {
		out = append(out, t.suffix...)
	}
	return out, nil
}

// fuse replaces every run of unk ids by one.
func fuse(ids []int32, unk int32) []int32 {
	out := ids[:0]
	prev := int32(-1)
	for _, id := range ids {
		if id != unk || prev != unk {
			out = append(out, id)
		}
		prev = id
	}
	return out
}

// replaceInvalid replaces each byte that is not part of a valid UTF-8 sequence by U+FFFD.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		b.WriteRune(r) // ranging yields RuneError for each invalid byte
	}
	return b.String()
}
