package bpe

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decStrip is the Strip decoder: up to start copies of content are removed from the front of every
// token and up to stop from its end (Llama-2 strips the space its normalizer prepended).
type decStrip struct {
	content     string
	start, stop int
}

func newDecStrip(b *build, raw json.RawMessage, field string) (decoder, error) {
	var c struct {
		Content *string `json:"content"`
		Start   int     `json:"start"`
		Stop    int     `json:"stop"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
		return nil, b.errf(field+".content", "want one character")
	}
	if c.Start < 0 || c.Stop < 0 {
		return nil, b.errf(field, "start %d, stop %d", c.Start, c.Stop)
	}
	return decStrip{content: *c.Content, start: c.Start, stop: c.Stop}, nil
}

// Decode strips every token.
func (d decStrip) Decode(tokens []string) []string {
	for i, s := range tokens {
		for n := 0; n < d.start && strings.HasPrefix(s, d.content); n++ {
			s = s[len(d.content):]
		}
		for n := 0; n < d.stop && strings.HasSuffix(s, d.content); n++ {
			s = s[:len(s)-len(d.content)]
		}
		tokens[i] = s
	}
	return tokens
}
