package bpe

import (
	"encoding/json"
	"strings"
)

// preByteLevel is the ByteLevel pre-tokenizer: it maps every byte of a piece to its GPT-2
// character (bytelevel.go), after cutting the piece with the GPT-2 regex when use_regex is set.
// A file with one is a byte-level tokenizer.
type preByteLevel struct {
	addPrefixSpace bool
	useRegex       bool
}

func newPreByteLevel(b *build, raw json.RawMessage, field string) (preTokenizer, error) {
	var c struct {
		AddPrefixSpace bool  `json:"add_prefix_space"`
		UseRegex       *bool `json:"use_regex"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	if b.byteLevel {
		return nil, b.errf(field, "a second ByteLevel step would map bytes twice")
	}
	b.byteLevel = true
	return preByteLevel{addPrefixSpace: c.AddPrefixSpace, useRegex: c.UseRegex == nil || *c.UseRegex}, nil
}

// PreTokenize maps the bytes of every piece, prefixing a space first when add_prefix_space asks.
func (p preByteLevel) PreTokenize(pieces []string, _ bool) []string {
	out := make([]string, 0, len(pieces))
	for _, s := range pieces {
		if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if p.useRegex {
			start := len(out)
			out = matchPieces(s, matchGPT2, out)
			for i := start; i < len(out); i++ {
				out[i] = byteMap(out[i])
			}
			continue
		}
		out = append(out, byteMap(s))
	}
	return out
}
