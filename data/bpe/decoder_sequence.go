package bpe

import "encoding/json"

// decSequence is the Sequence decoder: its decoders applied in order.
type decSequence []decoder

func newDecSequence(b *build, raw json.RawMessage, field string) (decoder, error) {
	items, err := readSequence(b, &decoderTypes, raw, field, "decoders")
	if err != nil {
		return nil, err
	}
	return decSequence(items), nil
}

// Decode applies each decoder to the tokens of the one before.
func (q decSequence) Decode(tokens []string) []string {
	for _, d := range q {
		tokens = d.Decode(tokens)
	}
	return tokens
}
