package bpe

import (
	"encoding/json"
	"strings"
)

// decByteFallback is the ByteFallback decoder: every run of <0xNN> tokens becomes the text of its
// bytes.
type decByteFallback struct{}

func newDecByteFallback(*build, json.RawMessage, string) (decoder, error) {
	return decByteFallback{}, nil
}

// Decode replaces each run of byte tokens by its text, U+FFFD where the bytes are not UTF-8.
func (decByteFallback) Decode(tokens []string) []string {
	out := tokens[:0:0]
	var run []byte
	flush := func() {
		if len(run) > 0 {
			out = append(out, lossyUTF8(run))
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
