package bpe

import "encoding/json"

// normPrepend is the Prepend normalizer (Llama-2's "▁" before every section).
type normPrepend struct {
	prepend string
}

func newNormPrepend(b *build, raw json.RawMessage, field string) (normalizer, error) {
	var c struct {
		Prepend *string `json:"prepend"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Prepend == nil {
		return nil, b.errf(field+".prepend", "missing or not a string")
	}
	return normPrepend{prepend: *c.Prepend}, nil
}

// Normalize puts the prefix before a non-empty s; an empty section stays empty, as in tokenizers.
func (n normPrepend) Normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prepend + s
}
