package wordpiece

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer is the BERT normaliser of HuggingFace tokenizers ("BertNormalizer"), applied in its
// order: clean text, pad CJK characters with spaces, strip accents, lowercase.
type normalizer struct {
	cleanText    bool
	chineseChars bool
	stripAccents bool
	lowercase    bool
}

// normalize returns the normalised form of s. Invalid UTF-8 bytes decode to U+FFFD, which clean
// text drops, as the reference tokenizer (which only accepts valid strings) never sees them.
func (n normalizer) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if n.cleanText {
			// The filter runs before the whitespace mapping, so control characters that are also
			// whitespace (U+000B, U+000C, U+0085) are removed rather than turned into spaces.
			if r == 0 || r == unicode.ReplacementChar || isControl(r) {
				continue
			}
			if isWhitespace(r) {
				r = ' '
			}
		}
		if n.chineseChars && isChineseChar(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if n.stripAccents {
		out = stripMarks(norm.NFD.String(out))
	}
	if n.lowercase {
		// Per rune, without the context rules of strings.ToLower (final sigma), as the reference
		// lowercases char by char.
		out = strings.Map(unicode.ToLower, out)
	}
	return out
}

// stripMarks drops nonspacing combining marks (category Mn), which after NFD removes accents.
func stripMarks(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

// isWhitespace is the whitespace test of the BERT normaliser and pre-tokenizer: Unicode
// White_Space, which includes tab, newline and carriage return.
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }

// isControl reports the "other" categories (Cc, Cf, Cs, Co and unassigned code points) except tab,
// newline and carriage return, which the BERT normaliser treats as whitespace.
func isControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
		return true
	}
	// Unassigned (Cn): in no category at all. Differences from the reference can only come from
	// code points that one Unicode version assigns and the other does not.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isPunct is BERT's punctuation: any ASCII punctuation (which includes symbols such as $ + < = > ^
// ` | ~) or a Unicode punctuation category (Pc Pd Ps Pe Pi Pf Po).
func isPunct(r rune) bool {
	if r < 0x80 {
		return (r >= 0x21 && r <= 0x2f) || (r >= 0x3a && r <= 0x40) || (r >= 0x5b && r <= 0x60) || (r >= 0x7b && r <= 0x7e)
	}
	return unicode.IsPunct(r)
}

// isChineseChar reports the CJK ideograph blocks that BERT splits into single-character words.
// The ranges are those of HuggingFace tokenizers (Rust), whose Extension E range starts at
// U+2B920 rather than U+2B820 as in the original BERT code; matching the reference exactly
// matters more here than the Unicode block boundaries.
func isChineseChar(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF,
		r >= 0x3400 && r <= 0x4DBF,
		r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F,
		r >= 0x2B740 && r <= 0x2B81F,
		r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF,
		r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}
