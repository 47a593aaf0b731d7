// Package wordpiece is a BERT WordPiece tokenizer that reads a HuggingFace tokenizer.json and gives
// the same token ids as the model's own tokenizer: BERT normaliser (clean text, CJK splitting,
// accent stripping by NFD, lowercasing), BERT pre-tokenizer (whitespace and punctuation splitting),
// greedy longest-match WordPiece with "##" continuations, special tokens matched verbatim in the
// input, and [CLS] ... [SEP] around each text.
package wordpiece

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Config holds the choices a tokenizer.json makes for a BERT tokenizer.
type Config struct {
	// CleanText removes control characters and maps whitespace to spaces.
	CleanText bool
	// ChineseChars makes every CJK ideograph a word of its own.
	ChineseChars bool
	// StripAccents decomposes (NFD) and drops nonspacing marks.
	StripAccents bool
	// Lowercase lowercases every character.
	Lowercase bool
	// Unk is the token for a word that cannot be split into vocabulary pieces.
	Unk string
	// Prefix marks a piece that continues a word ("##").
	Prefix string
	// MaxWordChars is the longest word, in characters, that is split; longer words become Unk.
	MaxWordChars int
	// CLS and SEP are put before and after every text.
	CLS, SEP string
	// Specials are matched verbatim in the raw text, before normalisation, and map to their own id.
	Specials []string
}

// BertUncased is the configuration of bert-base-uncased and its descendants (MiniLM included).
func BertUncased() Config {
	return Config{
		CleanText: true, ChineseChars: true, StripAccents: true, Lowercase: true,
		Unk: "[UNK]", Prefix: "##", MaxWordChars: 100, CLS: "[CLS]", SEP: "[SEP]",
		Specials: []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"},
	}
}

// Tokenizer turns text into BERT token ids. It is immutable and safe for concurrent use.
type Tokenizer struct {
	norm         normalizer
	vocab        map[string]int32 // whole-word-start pieces
	cont         map[string]int32 // continuation pieces, keyed without the prefix
	tokens       []string         // id -> token
	unk          int32
	cls, sep     int32
	maxWordChars int
	specials     []special // longest first, so the first match at a position is the longest
}

type special struct {
	text string
	id   int32
}

// New builds a tokenizer from a vocabulary (token -> id) and a configuration. Ids must be
// distinct and non-negative, and Unk, CLS, SEP and every special must be in the vocabulary.
func New(vocab map[string]int32, cfg Config) (*Tokenizer, error) {
	if len(vocab) == 0 {
		return nil, fmt.Errorf("wordpiece: empty vocabulary")
	}
	if cfg.MaxWordChars <= 0 {
		return nil, fmt.Errorf("wordpiece: max_input_chars_per_word must be positive, got %d", cfg.MaxWordChars)
	}
	if cfg.Prefix == "" {
		return nil, fmt.Errorf("wordpiece: empty continuing_subword_prefix")
	}
	maxID := int32(-1)
	seen := make(map[int32]string, len(vocab))
	for tok, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("wordpiece: token %q has negative id %d", tok, id)
		}
		if other, dup := seen[id]; dup {
			return nil, fmt.Errorf("wordpiece: id %d is given to both %q and %q", id, other, tok)
		}
		seen[id] = tok
		maxID = max(maxID, id)
	}
	t := &Tokenizer{
		norm: normalizer{
			cleanText: cfg.CleanText, chineseChars: cfg.ChineseChars,
			stripAccents: cfg.StripAccents, lowercase: cfg.Lowercase,
		},
		vocab:        make(map[string]int32, len(vocab)),
		cont:         make(map[string]int32),
		tokens:       make([]string, maxID+1),
		maxWordChars: cfg.MaxWordChars,
	}
	for tok, id := range vocab {
		t.tokens[id] = tok
		t.vocab[tok] = id
		if rest, ok := strings.CutPrefix(tok, cfg.Prefix); ok && rest != "" {
			t.cont[rest] = id
		}
	}
	lookup := func(what, tok string) (int32, error) {
		id, ok := vocab[tok]
		if !ok {
			return 0, fmt.Errorf("wordpiece: %s token %q is not in the vocabulary", what, tok)
		}
		return id, nil
	}
	var err error
	if t.unk, err = lookup("unknown", cfg.Unk); err != nil {
		return nil, err
	}
	if t.cls, err = lookup("CLS", cfg.CLS); err != nil {
		return nil, err
	}
	if t.sep, err = lookup("SEP", cfg.SEP); err != nil {
		return nil, err
	}
	for _, s := range cfg.Specials {
		if s == "" {
			return nil, fmt.Errorf("wordpiece: empty special token")
		}
		id, err := lookup("special", s)
		if err != nil {
			return nil, err
		}
		t.specials = append(t.specials, special{s, id})
	}
	sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i].text) > len(t.specials[j].text) })
	return t, nil
}

// fileJSON is the part of tokenizer.json this package reads.
type fileJSON struct {
	AddedTokens []struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer *struct {
		Type               string `json:"type"`
		CleanText          bool   `json:"clean_text"`
		HandleChineseChars bool   `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          bool   `json:"lowercase"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	PostProcessor *struct {
		Type   string          `json:"type"`
		Single []templatePiece `json:"single"`
		// BertProcessing: ["[CLS]", 101]
		CLS []any `json:"cls"`
		SEP []any `json:"sep"`
	} `json:"post_processor"`
	Model struct {
		Type         string           `json:"type"`
		UnkToken     string           `json:"unk_token"`
		Prefix       string           `json:"continuing_subword_prefix"`
		MaxWordChars int              `json:"max_input_chars_per_word"`
		Vocab        map[string]int32 `json:"vocab"`
	} `json:"model"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// Load reads a HuggingFace tokenizer.json of a BERT WordPiece tokenizer. Other tokenizer kinds
// (BPE, Unigram, other normalisers or pre-tokenizers) are rejected with an error naming the field.
func Load(path string) (*Tokenizer, error) {
	raw, err := safefile.Read(path, safefile.TokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("wordpiece: %w", err)
	}
	t, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse is Load on the bytes of a tokenizer.json.
func Parse(raw []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("wordpiece: tokenizer.json: %w", err)
	}
	if f.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("wordpiece: model.type is %q, want \"WordPiece\"", f.Model.Type)
	}
	cfg := Config{
		Unk: f.Model.UnkToken, Prefix: f.Model.Prefix, MaxWordChars: f.Model.MaxWordChars,
	}
	if f.Normalizer != nil {
		if f.Normalizer.Type != "BertNormalizer" {
			return nil, fmt.Errorf("wordpiece: normalizer.type is %q, want \"BertNormalizer\"", f.Normalizer.Type)
		}
		cfg.CleanText = f.Normalizer.CleanText
		cfg.ChineseChars = f.Normalizer.HandleChineseChars
		cfg.Lowercase = f.Normalizer.Lowercase
		// null means "follow lowercase", as in the reference implementation.
		cfg.StripAccents = f.Normalizer.Lowercase
		if f.Normalizer.StripAccents != nil {
			cfg.StripAccents = *f.Normalizer.StripAccents
		}
	}
	if f.PreTokenizer == nil || f.PreTokenizer.Type != "BertPreTokenizer" {
		got := "null"
		if f.PreTokenizer != nil {
			got = fmt.Sprintf("%q", f.PreTokenizer.Type)
		}
		return nil, fmt.Errorf("wordpiece: pre_tokenizer.type is %s, want \"BertPreTokenizer\"", got)
	}
	if f.PostProcessor == nil {
		return nil, fmt.Errorf("wordpiece: post_processor is null, want a [CLS] $A [SEP] template")
	}
	switch f.PostProcessor.Type {
	case "TemplateProcessing":
		s := f.PostProcessor.Single
		if len(s) != 3 || s[0].SpecialToken == nil || s[1].Sequence == nil || s[2].SpecialToken == nil {
			return nil, fmt.Errorf("wordpiece: post_processor.single must be [special, $A, special]")
		}
		cfg.CLS, cfg.SEP = s[0].SpecialToken.ID, s[2].SpecialToken.ID
	case "BertProcessing":
		var err error
		name := func(field string, v []any) (string, error) {
			if len(v) != 2 {
				return "", fmt.Errorf("wordpiece: post_processor.%s must be [token, id], got %v", field, v)
			}
			s, ok := v[0].(string)
			if !ok {
				return "", fmt.Errorf("wordpiece: post_processor.%s[0] is %v, want a string", field, v[0])
			}
			return s, nil
		}
		if cfg.CLS, err = name("cls", f.PostProcessor.CLS); err != nil {
			return nil, err
		}
		if cfg.SEP, err = name("sep", f.PostProcessor.SEP); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("wordpiece: post_processor.type is %q, want TemplateProcessing or BertProcessing", f.PostProcessor.Type)
	}
	vocab := f.Model.Vocab
	for i, a := range f.AddedTokens {
		if a.SingleWord || a.LStrip || a.RStrip || a.Normalized {
			return nil, fmt.Errorf("wordpiece: added_tokens[%d] %q: single_word/lstrip/rstrip/normalized options are not supported", i, a.Content)
		}
		if id, ok := vocab[a.Content]; ok && id != a.ID {
			return nil, fmt.Errorf("wordpiece: added_tokens[%d] %q has id %d but the vocabulary says %d", i, a.Content, a.ID, id)
		}
		if _, ok := vocab[a.Content]; !ok {
			vocab[a.Content] = a.ID
		}
		cfg.Specials = append(cfg.Specials, a.Content)
	}
	return New(vocab, cfg)
}

// VocabSize is one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the string of token id, or "" if id is out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of a vocabulary token.
func (t *Tokenizer) ID(token string) (int32, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// CLS is the id put before every text.
func (t *Tokenizer) CLS() int32 { return t.cls }

// SEP is the id put after every text.
func (t *Tokenizer) SEP() int32 { return t.sep }

// Encode returns [CLS] pieces... [SEP] for text. maxLen > 0 limits the total length, specials
// included, by dropping pieces from the end (the reference's truncation); maxLen must then be
// at least 2. maxLen <= 0 means no limit.
func (t *Tokenizer) Encode(text string, maxLen int) []int32 {
	ids := make([]int32, 0, len(text)/3+2)
	ids = append(ids, t.cls)
	ids = t.AppendPieces(ids, text)
	if maxLen > 0 && len(ids)+1 > maxLen {
		ids = ids[:max(maxLen-1, 1)]
	}
	return append(ids, t.sep)
}

// AppendPieces appends the ids of text's pieces, without [CLS] and [SEP], to dst.
func (t *Tokenizer) AppendPieces(dst []int32, text string) []int32 {
	for len(text) > 0 {
		pos, sp := t.nextSpecial(text)
		dst = t.appendSegment(dst, text[:pos])
		if pos == len(text) {
			break
		}
		dst = append(dst, sp.id)
		text = text[pos+len(sp.text):]
	}
	return dst
}

// nextSpecial finds the leftmost special token in s, the longest at that position; it returns
// len(s) when there is none.
func (t *Tokenizer) nextSpecial(s string) (int, special) {
	for i := 0; i < len(s); i++ {
		for _, sp := range t.specials {
			if strings.HasPrefix(s[i:], sp.text) {
				return i, sp
			}
		}
	}
	return len(s), special{}
}

// appendSegment normalises, pre-tokenizes and WordPiece-splits a text segment free of specials.
func (t *Tokenizer) appendSegment(dst []int32, s string) []int32 {
	if s == "" {
		return dst
	}
	s = t.norm.normalize(s)
	start := -1 // byte offset of the word being collected, -1 when between words
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if start >= 0 {
				dst = t.appendWord(dst, s[start:i])
				start = -1
			}
		case isPunct(r):
			if start >= 0 {
				dst = t.appendWord(dst, s[start:i])
				start = -1
			}
			dst = t.appendWord(dst, s[i:i+utf8.RuneLen(r)])
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		dst = t.appendWord(dst, s[start:])
	}
	return dst
}

// appendWord splits one word greedily into the longest vocabulary pieces; a word with a position
// no piece matches, or longer than MaxWordChars characters, becomes one unknown token.
func (t *Tokenizer) appendWord(dst []int32, w string) []int32 {
	if utf8.RuneCountInString(w) > t.maxWordChars {
		return append(dst, t.unk)
	}
	n0 := len(dst)
	for start := 0; start < len(w); {
		table := t.vocab
		if start > 0 {
			table = t.cont
		}
		end := len(w)
		found := false
		for end > start {
			if id, ok := table[w[start:end]]; ok {
				dst = append(dst, id)
				found = true
				break
			}
			// Step back one whole character.
			_, size := utf8.DecodeLastRuneInString(w[start:end])
			end -= size
		}
		if !found {
			return append(dst[:n0], t.unk)
		}
		start = end
	}
	return dst
}

// Tokens returns the token strings of ids (for debugging and tests).
func (t *Tokenizer) Tokens(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.Token(id)
	}
	return out
}
