package bpe

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decByteFallback is the ByteFallback decoder: every run of <0xNN> tokens becomes the text of its
// bytes, or, when those bytes are not UTF-8, one U+FFFD per byte of the run (as Hugging Face's
// tokenizers does; transformers.js replaces each maximal ill-formed subsequence instead, keeping
// the valid characters of the run).
type decByteFallback struct{}

func newDecByteFallback(*build, json.RawMessage, string) (decoder, error) {
	return decByteFallback{}, nil
}

// Decode replaces each run of byte tokens by its text (runText).
func (decByteFallback) Decode(tokens []string) []string {
	out := tokens[:0:0]
	var run []byte
	flush := func() {
		if len(run) > 0 {
			out = append(out, runText(run))
			run = run[:0]
		}
	}
	for _, s := range tokens {
		if b, ok := byteToken(s); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, s)
	}
	flush()
	return out
}

// runText is the text of a run of byte tokens: the bytes when they are UTF-8, else one U+FFFD per
// byte, valid characters in the run included (a lone "<0xE2><0x41>" is "\uFFFD\uFFFD", not
// "\uFFFDA").
func runText(run []byte) string {
	if utf8.Valid(run) {
		return string(run)
	}
	return strings.Repeat(string(utf8.RuneError), len(run))
}

// byteToken parses "<0xNN>".
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range s[3:5] {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | byte(c-'0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | byte(c-'A'+10)
		case c >= 'a' && c <= 'f':
			b = b<<4 | byte(c-'a'+10)
		default:
			return 0, false
		}
	}
	return b, true
}
