package bpe

import (
	"encoding/json"
	"strings"
)

// preMetaspace is the Metaspace pre-tokenizer (Mistral v0.3 and later): spaces become the
// replacement character, one is put before the text as prepend_scheme says, and with split the
// text is cut before every replacement character.
type preMetaspace struct {
	rep    string
	scheme string // "always", "first" or "never"
	split  bool
}

func newPreMetaspace(b *build, raw json.RawMessage, field string) (preTokenizer, error) {
	var c struct {
		Replacement    *string `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
		Split          *bool   `json:"split"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	if c.Replacement == nil || *c.Replacement == "" {
		return nil, b.errf(field+".replacement", "missing or empty")
	}
	// Files written before prepend_scheme existed say add_prefix_space instead.
	scheme := "always"
	if c.PrependScheme != nil {
		scheme = *c.PrependScheme
	} else if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		scheme = "never"
	}
	switch scheme {
	case "always", "first", "never":
	default:
		return nil, b.errf(field+".prepend_scheme", "%q is not supported (always, first, never)", scheme)
	}
	return preMetaspace{rep: *c.Replacement, scheme: scheme, split: c.Split == nil || *c.Split}, nil
}

// PreTokenize replaces the spaces of every piece, prepends the replacement where the scheme asks,
// and splits when split is set.
func (m preMetaspace) PreTokenize(pieces []string, first bool) []string {
	out := make([]string, 0, len(pieces))
	for _, p := range pieces {
		p = strings.ReplaceAll(p, " ", m.rep)
		if !strings.HasPrefix(p, m.rep) && (m.scheme == "always" || m.scheme == "first" && first) {
			p = m.rep + p
		}
		if !m.split {
			out = append(out, p)
			continue
		}
		// Split before every replacement character, which starts its word.
		for p != "" {
			i := strings.Index(p[1:], m.rep)
			if i < 0 {
				out = append(out, p)
				break
			}
			out = append(out, p[:i+1])
			p = p[i+1:]
		}
	}
	return out
}
