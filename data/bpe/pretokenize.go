package bpe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The Split pre-tokenizers of GPT-2, Llama-3 and Qwen use regexes with a lookahead (\s+(?!\S)) that
// Go's regexp cannot express. Each known pattern is implemented here as a scanner with the exact
// semantics of a backtracking engine (ordered alternation, greedy quantifiers) as Hugging Face's
// Rust tokenizers runs them with Oniguruma: \p{L} and \p{N} are the Unicode 16.0 general
// categories (unicode_tables.go, not Go's own, older tables), \s is the White_Space property
// (U+0085 is whitespace, U+FEFF is not: ECMAScript's \s, which transformers.js runs, is the other
// way round), and the case-insensitive contraction group folds case as Unicode does ("'ſ" is
// "'s"; transformers.js folds ASCII only).

// Known pre-tokenizer regexes, exactly as tokenizer.json files spell them.
const (
	// patLlama3 is Llama-3's: numbers in runs of at most three digits.
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patQwen is Qwen2/Qwen3's: every digit its own piece.
	patQwen = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patGPT2 is the ByteLevel pre-tokenizer's own (use_regex: true).
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// matcher returns the length in bytes of the pattern's match at the start of s (0: no match).
// s is non-empty valid UTF-8.
type matcher func(s string) int

// knownPatterns maps a tokenizer.json Regex to its scanner.
var knownPatterns = map[string]matcher{
	patLlama3: func(s string) int { return matchLlama(s, 3) },
	patQwen:   func(s string) int { return matchLlama(s, 1) },
	patGPT2:   matchGPT2,
}

// char classes of the patterns.
const (
	clsLetter = iota // \p{L}
	clsNumber        // \p{N}
	clsSpace         // \s (White_Space)
	clsOther         // none of the above
)

// asciiClass is the class of each ASCII byte.
var asciiClass = func() (t [128]uint8) {
	for c := 0; c < 128; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = clsLetter
		case c >= '0' && c <= '9':
			t[c] = clsNumber
		case c == ' ', c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
			t[c] = clsSpace
		default:
			t[c] = clsOther
		}
	}
	return t
}()

// isSpace reports whether r is whitespace as the Rust library has it: the White_Space property
// (its regex crates' \s, Rust's char::is_whitespace).
func isSpace(r rune) bool { return unicode.Is(unicodeSpace, r) }

// class is the class of r in the patterns.
func class(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	switch {
	case unicode.Is(unicodeLetter, r):
		return clsLetter
	case unicode.Is(unicodeNumber, r):
		return clsNumber
	case isSpace(r):
		return clsSpace
	}
	return clsOther
}

// at decodes the rune at s[i:] and its class; size 0 at the end of s.
func at(s string, i int) (r rune, c uint8, size int) {
	if i >= len(s) {
		return 0, 0, 0
	}
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), asciiClass[b], 1
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, class(r), size
}

// run returns the end of the run of runes of class c starting at i (at most max runes; max < 0:
// unbounded).
func run(s string, i int, c uint8, max int) int {
	for n := 0; max < 0 || n < max; n++ {
		_, ci, size := at(s, i)
		if size == 0 || ci != c {
			break
		}
		i += size
	}
	return i
}

// longS is U+017F LATIN SMALL LETTER LONG S, whose case folding is "s": the only non-ASCII
// character that folds to one of the contraction letters.
const longS = "ſ"

// contraction returns the length of 's|'t|'re|'ve|'m|'ll|'d at the start of s, else 0. With fold
// the letters match case-insensitively, by Unicode case folding as Oniguruma's (?i) does: ASCII
// case, and "ſ" for "s".
func contraction(s string, fold bool) int {
	if len(s) < 2 || s[0] != '\'' {
		return 0
	}
	if fold && strings.HasPrefix(s[1:], longS) {
		return 1 + len(longS)
	}
	lower := func(b byte) byte {
		if fold && b >= 'A' && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	switch lower(s[1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if len(s) < 3 {
		return 0
	}
	switch two := string([]byte{lower(s[1]), lower(s[2])}); two {
	case "re", "ve", "ll":
		return 3
	}
	return 0
}

// matchLlama implements patLlama3 (maxDigits 3) and patQwen (maxDigits 1).
func matchLlama(s string, maxDigits int) int {
	if n := contraction(s, true); n > 0 {
		return n
	}
	r0, c0, n0 := at(s, 0)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0 == clsLetter {
		return run(s, 0, clsLetter, -1)
	}
	if r0 != '\r' && r0 != '\n' && c0 != clsNumber {
		if _, c1, _ := at(s, n0); c1 == clsLetter {
			return run(s, n0, clsLetter, -1)
		}
	}
	// \p{N}{1,maxDigits}
	if c0 == clsNumber {
		return run(s, 0, clsNumber, maxDigits)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	start := 0
	if r0 == ' ' {
		if _, c1, _ := at(s, 1); c1 == clsOther {
			start = 1
		}
	}
	if _, c, _ := at(s, start); c == clsOther {
		e := run(s, start, clsOther, -1)
		for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
			e++
		}
		return e
	}
	// Here c0 is whitespace.
	// \s*[\r\n]+ : the whitespace run up to and including its last CR or LF.
	end, lastNL := 0, -1
	for {
		r, c, size := at(s, end)
		if size == 0 || c != clsSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		end += size
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	return spaceRun(s, end)
}

// spaceRun implements \s+(?!\S)|\s+ on a whitespace run s[:end] (end > 0): the whole run at the
// end of the text, else all of it but its last character (which then starts the next piece), or
// the single character when the run has only one.
func spaceRun(s string, end int) int {
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[:end])
	if end-last > 0 {
		return end - last
	}
	return end
}

// matchGPT2 implements patGPT2.
func matchGPT2(s string) int {
	if n := contraction(s, false); n > 0 {
		return n
	}
	r0, c0, n0 := at(s, 0)
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
	if r0 == ' ' {
		if _, c1, size1 := at(s, n0); size1 > 0 && c1 != clsSpace {
			return run(s, n0, c1, -1)
		}
	}
	if c0 != clsSpace {
		return run(s, 0, c0, -1)
	}
	return spaceRun(s, run(s, 0, clsSpace, -1))
}

// splitPieces splits s at the matches of m, keeping the matches and the text between them
// (the Isolated behaviour).
func splitPieces(s string, m matcher, dst []string) []string {
	gap := 0
	for i := 0; i < len(s); {
		if n := m(s[i:]); n > 0 {
			if gap < i {
				dst = append(dst, s[gap:i])
			}
			dst = append(dst, s[i:i+n])
			i += n
			gap = i
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if gap < len(s) {
		dst = append(dst, s[gap:])
	}
	return dst
}

// matchPieces returns only the matches of m in s (the Removed behaviour and ByteLevel's own regex).
func matchPieces(s string, m matcher, dst []string) []string {
	for i := 0; i < len(s); {
		if n := m(s[i:]); n > 0 {
			dst = append(dst, s[i:i+n])
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return dst
}
