package bpe

import (
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids through the tokenizer's decoder (special tokens included, as
// their text). Ids without a token are skipped. Unlike transformers' default for some tokenizers,
// no "clean up of tokenization spaces" is applied, so Decode(Encode(s, false)) == s for the
// tokenizers of the three reference files whenever the normalizer keeps s (NFC text for Qwen).
func (t *Tokenizer) Decode(ids []int) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if tok, ok := t.Token(id); ok {
			toks = append(toks, tok)
		}
	}
	if t.decoder != nil {
		toks = t.decoder.Decode(toks)
	}
	return strings.Join(toks, "")
}

// lossyUTF8 decodes b, replacing each maximal ill-formed subsequence by one U+FFFD (the WHATWG
// and Rust from_utf8_lossy rule that TextDecoder follows).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.WriteRune(r)
			b = b[size:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart is the length of the ill-formed prefix of b to replace by one U+FFFD: a lead byte
// and the continuation bytes that could still have completed it, or one byte.
func maximalSubpart(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(b); i++ {
		if i == 1 && (b[i] < lo || b[i] > hi) || i > 1 && (b[i] < 0x80 || b[i] > 0xBF) {
			break
		}
	}
	return i
}
