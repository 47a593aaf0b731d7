package bpe

import "encoding/json"

// preSplit is the Split pre-tokenizer with one of the known regexes (see pretokenize.go).
type preSplit struct {
	match matcher
	// cut is splitPieces (Isolated: matches and the text between them are pieces) or
	// matchPieces (Removed: only the matches are).
	cut func(s string, m matcher, dst []string) []string
}

func newPreSplit(b *build, raw json.RawMessage, field string) (preTokenizer, error) {
	var c struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	if c.Pattern.Regex == nil {
		return nil, b.errf(field+".pattern", "only Regex patterns are supported in Split")
	}
	m, ok := knownPatterns[*c.Pattern.Regex]
	if !ok {
		return nil, b.errf(field+".pattern.Regex", "%q is not one of the known pre-tokenizer regexes (GPT-2, Llama-3, Qwen)", *c.Pattern.Regex)
	}
	if c.Invert {
		return nil, b.errf(field+".invert", "true is not supported")
	}
	s := &preSplit{match: m}
	switch c.Behavior {
	case "Isolated":
		s.cut = splitPieces
	case "Removed":
		s.cut = matchPieces
	default:
		return nil, b.errf(field+".behavior", "%q is not supported (Isolated, Removed)", c.Behavior)
	}
	return s, nil
}

// PreTokenize cuts every piece at the matches of the regex.
func (s *preSplit) PreTokenize(pieces []string, _ bool) []string {
	out := make([]string, 0, len(pieces)*4)
	for _, p := range pieces {
		out = s.cut(p, s.match, out)
	}
	return out
}
