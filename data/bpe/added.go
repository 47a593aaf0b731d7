package bpe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is a token matched verbatim in the raw text before normalization.
type addedToken struct {
	id                         int32
	content                    string
	lstrip, rstrip, singleWord bool
	special, normalized        bool
}

// addedSplitter cuts a text into added tokens and the text between them: at each position the
// longest added token that starts there, the leftmost position first (transformers.js's
// DictionarySplitter and tokenizers' AddedVocabulary agree on this).
type addedSplitter struct {
	byContent map[string]addedToken
	first     [256]bool // first bytes of the contents
	lengths   []int     // distinct content lengths, longest first
}

// section is a run of text to tokenize (id -1) or one added token (its id).
type section struct {
	text string
	id   int32
}

func (a *addedSplitter) add(tok addedToken) {
	if a.byContent == nil {
		a.byContent = make(map[string]addedToken)
	}
	a.byContent[tok.content] = tok
	a.first[tok.content[0]] = true
	if !slices.Contains(a.lengths, len(tok.content)) {
		a.lengths = append(a.lengths, len(tok.content))
		slices.SortFunc(a.lengths, func(x, y int) int { return y - x })
	}
}

// match returns the added token at text[i:], if any.
func (a *addedSplitter) match(text string, i int) (addedToken, bool) {
	if !a.first[text[i]] {
		return addedToken{}, false
	}
	for _, n := range a.lengths {
		if i+n > len(text) {
			continue
		}
		tok, ok := a.byContent[text[i:i+n]]
		if !ok {
			continue
		}
		if tok.singleWord && !wordBoundaries(text, i, i+n) {
			continue
		}
		return tok, true
	}
	return addedToken{}, false
}

// wordBoundaries reports whether text[i:j] is not glued to a word character on either side
// (single_word tokens). Word characters are the Rust library's: its regex crate's \w (letters and
// other alphabetic characters, marks, decimal digits, connector punctuation, ZWJ and ZWNJ).
func wordBoundaries(text string, i, j int) bool {
	isWord := func(r rune) bool { return unicode.Is(unicodeWord, r) }
	if r, _ := utf8.DecodeLastRuneInString(text[:i]); i > 0 && isWord(r) {
		return false
	}
	if r, _ := utf8.DecodeRuneInString(text[j:]); j < len(text) && isWord(r) {
		return false
	}
	return true
}

// split cuts text into sections. An added token with lstrip (rstrip) removes the whitespace (the
// White_Space property, as the Rust library has it) at the end (start) of the text section before
// (after) it.
func (a *addedSplitter) split(text string) []section {
	if len(a.lengths) == 0 {
		return []section{{text: text, id: -1}}
	}
	var out []section
	start := 0
	for i := 0; i < len(text); {
		tok, ok := a.match(text, i)
		if !ok {
			i++
			continue
		}
		if i > start {
			out = append(out, section{text: text[start:i], id: -1})
		}
		out = append(out, section{text: tok.content, id: tok.id})
		i += len(tok.content)
		start = i
	}
	if start < len(text) {
		out = append(out, section{text: text[start:], id: -1})
	}
	for k, s := range out {
		if s.id < 0 {
			continue
		}
		tok := a.byContent[s.text]
		if tok.lstrip && k > 0 && out[k-1].id < 0 {
			out[k-1].text = strings.TrimRightFunc(out[k-1].text, isSpace)
		}
		if tok.rstrip && k+1 < len(out) && out[k+1].id < 0 {
			out[k+1].text = strings.TrimLeftFunc(out[k+1].text, isSpace)
		}
	}
	return out
}

// addedTokens registers tokenizer.json's added_tokens and those of tokenizer_config.json's
// added_tokens_decoder that tokenizer.json lacks, then builds the one-character lookup table.
func (l *loader) addedTokens(t *Tokenizer, list []addedJSON, cfg *configJSON) error {
	register := func(a addedJSON, id int, field string) error {
		if a.Content == "" {
			return fmt.Errorf("%s.content: missing or empty", field)
		}
		if err := l.checkID(id); err != nil {
			return fmt.Errorf("%s.id: %w", field, err)
		}
		if prev, ok := t.addedByID[int32(id)]; ok {
			if prev.content != a.Content {
				return fmt.Errorf("%s: id %d is both %q and %q", field, id, prev.content, a.Content)
			}
			return nil
		}
		if id >= len(t.tokens) {
			t.tokens = append(t.tokens, make([]string, id+1-len(t.tokens))...)
		}
		if prev := t.tokens[id]; prev != "" && prev != a.Content {
			return fmt.Errorf("%s: id %d is %q in model.vocab but %q here", field, id, prev, a.Content)
		}
		tok := addedToken{id: int32(id), content: a.Content, lstrip: a.LStrip, rstrip: a.RStrip,
			singleWord: a.SingleWord, special: a.Special, normalized: a.Normalized}
		t.tokens[id] = a.Content
		t.vocab[a.Content] = int32(id)
		t.addedByID[int32(id)] = tok
		if a.Normalized {
			t.addedNorm.add(tok)
		} else {
			t.added.add(tok)
		}
		if a.Special {
			t.specialIDs[int32(id)] = true
		}
		return nil
	}
	for i, a := range list {
		field := fmt.Sprintf("added_tokens[%d]", i)
		if a.ID == nil {
			return l.errf(field+".id", "missing")
		}
		if err := register(a, *a.ID, field); err != nil {
			return fmt.Errorf("bpe: %s: %w", l.path, err)
		}
	}
	if cfg != nil {
		keys := make([]string, 0, len(cfg.AddedTokensDecoder))
		for k := range cfg.AddedTokensDecoder {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			id, err := strconv.Atoi(k)
			if err != nil {
				return fmt.Errorf("bpe: %s: added_tokens_decoder: key %q is not an id", l.cfgPath, k)
			}
			if err := register(cfg.AddedTokensDecoder[k], id, "added_tokens_decoder."+k); err != nil {
				return fmt.Errorf("bpe: %s: %w", l.cfgPath, err)
			}
		}
	}
	t.lowRune = make([]int32, 0x3000)
	for i := range t.lowRune {
		t.lowRune[i] = -1
	}
	for tok, id := range t.vocab {
		if r, size := utf8.DecodeRuneInString(tok); size == len(tok) && r != utf8.RuneError && int(r) < len(t.lowRune) {
			t.lowRune[r] = id
		}
	}
	return nil
}
