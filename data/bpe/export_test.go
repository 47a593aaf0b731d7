package bpe

import "unicode"

// ComponentTypes lists the component types the registries support, by the tokenizer.json key of
// their kind, for the external tests.
func ComponentTypes() map[string][]string {
	return map[string][]string{
		"normalizer":     normalizerTypes.names(),
		"pre_tokenizer":  preTokenizerTypes.names(),
		"decoder":        decoderTypes.names(),
		"post_processor": postProcessorTypes.names(),
	}
}

// PreTokens returns the pre-tokenizer's pieces of text after the normalizer, with no added token
// split out first, for the external tests (the Rust oracle's --pretokens).
func (t *Tokenizer) PreTokens(text string) []string {
	pieces := []string{t.Normalize(text)}
	for _, p := range t.preTok {
		pieces = p(pieces, true)
	}
	return pieces
}

// Classes of the pre-tokenizer regexes, as RuneClass reports them.
const (
	ClassLetter = clsLetter
	ClassNumber = clsNumber
	ClassSpace  = clsSpace
	ClassOther  = clsOther
)

// RuneClass is the class of r in the pre-tokenizer regexes.
func RuneClass(r rune) uint8 { return class(r) }

// UnicodeTables are the generated tables by the name of the property they hold, and the
// Unicode versions of the data, for the test that checks them against the data.
func UnicodeTables() (tables map[string]*unicode.RangeTable, version, normVersion string) {
	return map[string]*unicode.RangeTable{
		"L": unicodeLetter, "N": unicodeNumber, "White_Space": unicodeSpace, "word": unicodeWord,
		"unassigned-9.0": unicodeAfter9,
	}, unicodeVersion, normUnicodeVersion
}

// Normalize is the tokenizer's normalizer applied to s (s itself when it has none).
func (t *Tokenizer) Normalize(s string) string {
	if t.normalizer == nil {
		return s
	}
	return t.normalizer.Normalize(s)
}

// AddedFlagsJSON is a small byte-level tokenizer.json (blJSON) with added tokens of every flag:
// lstrip, rstrip, single_word, special or not, normalized or not.
func AddedFlagsJSON() map[string]any {
	tj := blJSON()
	added := func(id int, content string, single, lstrip, rstrip, normalized, special bool) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": single, "lstrip": lstrip,
			"rstrip": rstrip, "normalized": normalized, "special": special}
	}
	tj["added_tokens"] = append(tj["added_tokens"].([]any),
		added(261, "<L>", false, true, false, false, false),
		added(262, "<R>", false, false, true, false, false),
		added(263, "<LR>", false, true, true, false, true),
		added(264, "ab", true, false, false, false, false),
		added(265, "<W>", true, false, false, false, true),
	)
	return tj
}
