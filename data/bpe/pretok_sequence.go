package bpe

import "encoding/json"

// preSequence is the Sequence pre-tokenizer: its pre-tokenizers applied in order.
type preSequence []preTokenizer

func newPreSequence(b *build, raw json.RawMessage, field string) (preTokenizer, error) {
	items, err := readSequence(b, &preTokenizerTypes, raw, field, "pretokenizers")
	if err != nil {
		return nil, err
	}
	return preSequence(items), nil
}

// PreTokenize applies each pre-tokenizer to the pieces of the one before.
func (q preSequence) PreTokenize(pieces []string, first bool) []string {
	for _, p := range q {
		pieces = p.PreTokenize(pieces, first)
	}
	return pieces
}

// preSteps lists the steps Encode runs for p, each Sequence opened in place, so that a file whose
// pre-tokenizer is an empty Sequence has no step, as one without a pre-tokenizer (which lets the
// SentencePiece word split apply).
func preSteps(p preTokenizer) []preStep {
	switch p := p.(type) {
	case nil:
		return nil
	case preSequence:
		var out []preStep
		for _, q := range p {
			out = append(out, preSteps(q)...)
		}
		return out
	}
	return []preStep{p.PreTokenize}
}
