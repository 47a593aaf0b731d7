package bpe

import (
	"strings"
	"unicode/utf8"
)

// preWords is not a tokenizer.json component: it is the pre-tokenizer the loader adds to a
// SentencePiece tokenizer that has none when mergesStayInWords holds, cutting a section into
// words (splitWords) that BPE then merges one by one, with the same ids.
type preWords struct{}

// PreTokenize cuts every piece into its words.
func (preWords) PreTokenize(pieces []string, _ bool) []string {
	out := make([]string, 0, len(pieces)*8)
	for _, p := range pieces {
		out = splitWords(p, out)
	}
	return out
}

// spaceMark is SentencePiece's space, U+2581.
const spaceMark = "▁"

// mergesStayInWords reports whether every merged token has the form ▁*[^▁]*. Then no merge can
// join a character to a "▁" after it, so BPE over a whole section (Llama-2 and Mistral files have
// no pre-tokenizer: a text is one piece) gives the same tokens as BPE over its words cut before
// each "▁" that follows another character; the words are short and repeat, so the piece cache
// makes a long text linear instead of one heap over every character.
func mergesStayInWords(t *Tokenizer) bool {
	for _, m := range t.merges {
		tok := strings.TrimLeft(t.tokens[m.id], spaceMark)
		if strings.Contains(tok, spaceMark) {
			return false
		}
	}
	return true
}

// splitWords cuts s before every "▁" that follows a character other than "▁".
func splitWords(s string, dst []string) []string {
	start, afterMark := 0, true
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], spaceMark) {
			if !afterMark {
				dst = append(dst, s[start:i])
				start = i
			}
			afterMark = true
			i += len(spaceMark)
			continue
		}
		afterMark = false
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if start < len(s) {
		dst = append(dst, s[start:])
	}
	return dst
}
