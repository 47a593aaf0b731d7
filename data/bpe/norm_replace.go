package bpe

import (
	"encoding/json"
	"strings"
)

// normReplace is the Replace normalizer with a String pattern (Llama-2's " " to "▁").
type normReplace struct {
	from, to string
}

func newNormReplace(b *build, raw json.RawMessage, field string) (normalizer, error) {
	from, to, err := b.readReplace(raw, field)
	if err != nil {
		return nil, err
	}
	return normReplace{from: from, to: to}, nil
}

// Normalize replaces every occurrence of the pattern.
func (n normReplace) Normalize(s string) string { return strings.ReplaceAll(s, n.from, n.to) }
