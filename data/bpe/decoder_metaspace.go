package bpe

import (
	"encoding/json"
	"strings"
)

// decMetaspace is the Metaspace decoder: the replacement character becomes a space, and the space
// the pre-tokenizer prepended is removed from the first token.
type decMetaspace struct {
	rep   string
	strip bool // remove a leading space from the first token
}

func newDecMetaspace(b *build, raw json.RawMessage, field string) (decoder, error) {
	var c struct {
		Replacement    *string `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	if c.Replacement == nil || *c.Replacement == "" {
		return nil, b.errf(field+".replacement", "missing or empty")
	}
	strip := true
	if c.PrependScheme != nil {
		strip = *c.PrependScheme != "never"
	} else if c.AddPrefixSpace != nil {
		strip = *c.AddPrefixSpace
	}
	return decMetaspace{rep: *c.Replacement, strip: strip}, nil
}

// Decode turns replacement characters back into spaces.
func (d decMetaspace) Decode(tokens []string) []string {
	for i, s := range tokens {
		s = strings.ReplaceAll(s, d.rep, " ")
		if i == 0 && d.strip {
			s = strings.TrimPrefix(s, " ")
		}
		tokens[i] = s
	}
	return tokens
}
