package bpe_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/data/bpe"
	"golang.org/x/text/unicode/norm"
)

// The code-point sweep runs every code point of planes 0-3 and 14 (all of Unicode 16's
// assignments outside the private-use planes) and a sample of the other planes through the real
// tokenizers and the Rust oracle: each code point alone, then in context, in texts where a class
// the Rust library gives it other than Go's changes the pre-tokenizer's pieces, which are compared
// too (byte-level tokenizers), so that a class difference cannot hide behind ids that agree:
//
//   - letters and "other" code points (the classes of nearly all code points) in runs of up to 64
//     of their class in code-point order, behind a fixed member of the class ("a" or "!"): a run
//     is one piece exactly when every code point in it has the class Go gives it;
//   - numbers and whitespace each between a letter and punctuation and between punctuation and a
//     letter, where the four classes give four different cuts;
//   - the code points the fixes are about (ASCII, Latin-1 and Latin Extended, every whitespace of
//     Unicode or ECMAScript, the case variants of ASCII letters, the letters and numbers Go's own
//     tables classify differently) in many contexts, the contractions included;
//   - for the normalizers (Qwen's NFC): every canonical decomposition, and every combining mark
//     before and after marks of other combining classes.

// sweepCodePoints is every code point of planes 0-3 and 14 except the surrogates, plus the
// first and last 64 of every other plane.
func sweepCodePoints() []rune {
	var cps []rune
	for plane := rune(0); plane <= 16; plane++ {
		lo, hi := plane<<16, plane<<16|0xFFFF
		if plane <= 3 || plane == 14 {
			for r := lo; r <= hi; r++ {
				if utf8.ValidRune(r) {
					cps = append(cps, r)
				}
			}
			continue
		}
		for r := lo; r < lo+64; r++ {
			cps = append(cps, r)
		}
		for r := hi - 63; r <= hi; r++ {
			cps = append(cps, r)
		}
	}
	return cps
}

// sweepFocus reports whether r is one of the code points the fixes are about.
func sweepFocus(r rune) bool {
	if r <= 0x24F || r == 0xFEFF || unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) {
		return true
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return true
		}
	}
	c := bpe.RuneClass(r)
	return (c == bpe.ClassLetter) != unicode.IsLetter(r) || (c == bpe.ClassNumber) != unicode.IsNumber(r)
}

// focusContexts writes the contexts of a code point the fixes are about: between letters, digits
// and punctuation, after a space and before a line feed, after an apostrophe and before a letter
// (the contractions), and repeated.
func focusContexts(b *strings.Builder, c string) {
	for _, s := range []string{"a", c, "a ", "1", c, "1 ", "!", c, "! ", c, "\n'", c, "a ", c, c, c, c, "\n"} {
		b.WriteString(s)
	}
}

// sweepTexts returns the texts of every code point alone, and the texts of the code points in
// context, several code points a text.
func sweepTexts(cps []rune) (alone, context []string) {
	alone = make([]string, len(cps))
	for i, r := range cps {
		alone[i] = string(r)
	}
	var b strings.Builder
	flush := func(max int) {
		if b.Len() >= max {
			context = append(context, b.String())
			b.Reset()
		}
	}
	// Runs of letters and of other code points.
	for _, c := range []struct {
		class uint8
		lead  string
	}{{bpe.ClassLetter, "a"}, {bpe.ClassOther, "!"}} {
		n := 0
		for _, r := range cps {
			if bpe.RuneClass(r) != c.class {
				continue
			}
			if n%64 == 0 {
				b.WriteString("\n" + c.lead)
			}
			b.WriteRune(r)
			if n++; n%64 == 0 {
				flush(1 << 14)
			}
		}
		flush(0)
	}
	// Numbers and whitespace, each alone between letters and punctuation; the focus code points.
	for _, r := range cps {
		if cl := bpe.RuneClass(r); cl == bpe.ClassNumber || cl == bpe.ClassSpace {
			c := string(r)
			b.WriteString("a" + c + "!" + c + "a")
			flush(1 << 14)
		}
	}
	flush(0)
	for _, r := range cps {
		if sweepFocus(r) {
			focusContexts(&b, string(r))
			flush(1 << 14)
		}
	}
	flush(0)
	// Canonical decompositions, and combining marks around marks of other classes.
	for _, r := range cps {
		c := string(r)
		if d := norm.NFD.String(c); d != c {
			b.WriteString(d + " " + c + " ")
		}
		if ccc := norm.NFD.PropertiesString(c).CCC(); ccc != 0 {
			for _, m := range []string{"\u0316", "\u0301", "\u05B0", "\u0334"} { // 220, 230, 10, 1
				b.WriteString("x" + m + c + " x" + c + m + " ")
			}
		}
		flush(1 << 14)
	}
	flush(0)
	return alone, context
}

// TestUnicodeSweep asserts the ids without special tokens, the decoded text and (byte-level
// tokenizers, texts in context) the pre-tokenizer's pieces of the Rust library for every text of
// the sweep.
func TestUnicodeSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("the sweep runs node on every code point")
	}
	oracleRust.need(t)
	dir := tokenizersDir(t)
	cps := sweepCodePoints()
	alone, context := sweepTexts(cps)
	for _, name := range realTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			pieces := tok.Kind() == bpe.KindByteLevel
			start := time.Now()
			for _, set := range []struct {
				what   string
				texts  []string
				pieces bool
			}{{"alone", alone, false}, {"in context", context, pieces}} {
				// Go's results are worked out while the oracle runs.
				got := make([]oracleResult, len(set.texts))
				gotPieces := make([][]string, len(set.texts))
				done := make(chan error, 1)
				go func() {
					for i, text := range set.texts {
						ids, err := tok.Encode(text, false)
						if err != nil {
							done <- fmt.Errorf("%q: %w", clip(text), err)
							return
						}
						got[i] = oracleResult{Without: ids, Decoded: tok.Decode(ids)}
						if set.pieces {
							gotPieces[i] = tok.PreTokens(text)
						}
					}
					done <- nil
				}()
				args := []string{"--no-special"}
				if set.pieces {
					args = append(args, "--pretokens")
				}
				want := runOracle(t, oracleRust, filepath.Join(dir, name), set.texts, args...)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				bad := 0
				for i, text := range set.texts {
					w := want[i]
					if slices.Equal(got[i].Without, w.Without) && got[i].Decoded == w.Decoded &&
						(!set.pieces || slices.Equal(gotPieces[i], w.Pretokens)) {
						continue
					}
					if bad++; bad <= 8 {
						t.Errorf("%s text %d %q: %s", set.what, i, clip(text), sweepDifference(got[i], w, gotPieces[i], set.pieces))
					}
				}
				t.Logf("%s: %d texts of %d code points %s: %d differ from the Rust library (%v)",
					name, len(set.texts), len(cps), set.what, bad, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// sweepDifference describes where the Go result first differs from the oracle's: the first
// differing piece, else the first differing id, else the decoded texts.
func sweepDifference(got, want oracleResult, gotPieces []string, pieces bool) string {
	if pieces && !slices.Equal(gotPieces, want.Pretokens) {
		for k := range min(len(gotPieces), len(want.Pretokens)) + 1 {
			if k == len(gotPieces) || k == len(want.Pretokens) || gotPieces[k] != want.Pretokens[k] {
				return fmt.Sprintf("piece %d: %q, want %q", k, window(gotPieces, k), window(want.Pretokens, k))
			}
		}
	}
	if k := firstDiff(got.Without, want.Without); k >= 0 {
		return fmt.Sprintf("id %d: %v, want %v", k, window(got.Without, k), window(want.Without, k))
	}
	return fmt.Sprintf("decoded %q, want %q", clip(got.Decoded), clip(want.Decoded))
}

// firstDiff is the first index where a and b differ, -1 when they are equal.
func firstDiff(a, b []int) int {
	for k := range min(len(a), len(b)) {
		if a[k] != b[k] {
			return k
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// window is s[k-2:k+3], clipped to s.
func window[T any](s []T, k int) []T {
	return s[max(0, min(k-2, len(s))):min(len(s), k+3)]
}
