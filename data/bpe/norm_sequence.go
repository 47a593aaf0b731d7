package bpe

import "encoding/json"

// normSequence is the Sequence normalizer: its normalizers applied in order.
type normSequence []normalizer

func newNormSequence(b *build, raw json.RawMessage, field string) (normalizer, error) {
	items, err := readSequence(b, &normalizerTypes, raw, field, "normalizers")
	if err != nil {
		return nil, err
	}
	return normSequence(items), nil
}

// Normalize applies each normalizer to the output of the one before.
func (q normSequence) Normalize(s string) string {
	for _, n := range q {
		s = n.Normalize(s)
	}
	return s
}
