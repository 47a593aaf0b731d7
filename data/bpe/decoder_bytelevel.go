package bpe

import (
	"encoding/json"
	"unicode/utf8"
)

// decByteLevel is the ByteLevel decoder: it maps the GPT-2 characters of tokens back to bytes.
// Added tokens were never byte-mapped, so they are kept as they are.
type decByteLevel struct {
	isAdded func(tok string) bool
}

// newDecByteLevel reads no setting: add_prefix_space, trim_offsets and use_regex do not change
// how tokens decode.
func newDecByteLevel(b *build, _ json.RawMessage, _ string) (decoder, error) {
	return decByteLevel{isAdded: b.t.isAdded}, nil
}

// Decode returns the text of the tokens, one token per run of byte-level tokens and per added
// token.
func (d decByteLevel) Decode(tokens []string) []string {
	var out []string
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			out = append(out, lossyUTF8(buf))
			buf = buf[:0]
		}
	}
	for _, s := range tokens {
		if d.isAdded(s) {
			flush()
			out = append(out, s)
			continue
		}
		for _, r := range s {
			if b, ok := unicodeToByte(r); ok {
				buf = append(buf, b)
			} else {
				buf = utf8.AppendRune(buf, r)
			}
		}
	}
	flush()
	return out
}

// isAdded reports whether tok is an added token.
func (t *Tokenizer) isAdded(tok string) bool {
	id, ok := t.vocab[tok]
	if !ok {
		return false
	}
	_, ok = t.addedByID[id]
	return ok
}
