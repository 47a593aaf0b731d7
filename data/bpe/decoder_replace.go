package bpe

import (
	"encoding/json"
	"strings"
)

// decReplace is the Replace decoder with a String pattern (Llama-2's "▁" back to " ").
type decReplace struct {
	from, to string
}

func newDecReplace(b *build, raw json.RawMessage, field string) (decoder, error) {
	from, to, err := b.readReplace(raw, field)
	if err != nil {
		return nil, err
	}
	return decReplace{from: from, to: to}, nil
}

// Decode replaces the pattern in every token.
func (d decReplace) Decode(tokens []string) []string {
	for i, s := range tokens {
		tokens[i] = strings.ReplaceAll(s, d.from, d.to)
	}
	return tokens
}
