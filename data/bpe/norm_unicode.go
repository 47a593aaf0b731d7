package bpe

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normUnicode is one of the NFC, NFD, NFKC and NFKD normalizers (Qwen's NFC); they have no
// settings. They give what Hugging Face's tokenizers gives, which differs from Go's norm package
// in two ways:
//
//   - the library normalizes with Unicode 9.0 data (crate unicode-normalization-alignments),
//     where a character assigned later has no decomposition, combines with nothing and has
//     combining class 0. Normalization data of assigned characters never changes, so the result
//     is the normalization of each run of characters Unicode 9.0 has, with the later characters
//     left between them as they are: they end every reordering and composition, as starters the
//     data does not know;
//   - it does not put U+034F COMBINING GRAPHEME JOINER after every 30 combining marks in a row
//     (the Stream-Safe Text Format, which Go's norm applies): such runs are normalized by
//     normalizeLong instead.
type normUnicode struct {
	form norm.Form
}

// newNormUnicode returns the constructor of the normalizer to form.
func newNormUnicode(form norm.Form) constructor[normalizer] {
	return func(*build, json.RawMessage, string) (normalizer, error) {
		return normUnicode{form: form}, nil
	}
}

// Normalize returns s in the normalization form, as Unicode 9.0 data has it.
func (n normUnicode) Normalize(s string) string {
	i := indexAfter9(s)
	if i < 0 {
		return n.normalize9(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		b.WriteString(n.normalize9(s[:i]))
		_, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(s[i : i+size])
		s = s[i+size:]
		i = indexAfter9(s)
	}
	b.WriteString(n.normalize9(s))
	return b.String()
}

// indexAfter9 is the byte index of the first character of s that Unicode 9.0 does not have, -1
// when there is none.
func indexAfter9(s string) int {
	for i, r := range s {
		if r >= 0x0378 && unicode.Is(unicodeAfter9, r) { // U+0378 is the first such code point
			return i
		}
	}
	return -1
}

// cgj is U+034F COMBINING GRAPHEME JOINER, which Go's norm inserts into long runs of marks.
const cgj = "\u034f"

// normalize9 normalizes s, whose characters Unicode 9.0 all has: with Go's norm, unless that
// inserted a U+034F.
func (n normUnicode) normalize9(s string) string {
	out := n.form.String(s)
	if strings.Count(out, cgj) != strings.Count(s, cgj) {
		return n.normalizeLong(s)
	}
	return out
}

// normalizeLong normalizes s by the Unicode algorithm itself, one character at a time on Go's
// per-character data: full decomposition, canonical ordering of every run of combining marks,
// then, for the composed forms, canonical composition.
func (n normUnicode) normalizeLong(s string) string {
	type char struct {
		r   rune
		ccc uint8
	}
	decompose := norm.NFD
	if n.form == norm.NFKC || n.form == norm.NFKD {
		decompose = norm.NFKD
	}
	var cs []char
	for _, r := range s {
		for _, d := range decompose.String(string(r)) { // one character: no U+034F
			cs = append(cs, char{d, norm.NFD.PropertiesString(string(d)).CCC()})
		}
	}
	for i := 0; i < len(cs); {
		if cs[i].ccc == 0 {
			i++
			continue
		}
		j := i
		for j < len(cs) && cs[j].ccc != 0 {
			j++
		}
		slices.SortStableFunc(cs[i:j], func(a, b char) int { return cmp.Compare(a.ccc, b.ccc) })
		i = j
	}
	if n.form == norm.NFC || n.form == norm.NFKC {
		out, starter := cs[:0], -1
		for _, c := range cs {
			// c combines with the last starter unless a character between them is a starter or
			// has a combining class as high as c's (the marks between are in canonical order, so
			// the last one has the highest).
			if starter >= 0 && (len(out)-1 == starter || out[len(out)-1].ccc < c.ccc) {
				if r, ok := composePair(out[starter].r, c.r); ok {
					out[starter].r = r
					continue
				}
			}
			if c.ccc == 0 {
				starter = len(out)
			}
			out = append(out, c)
		}
		cs = out
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range cs {
		b.WriteRune(c.r)
	}
	return b.String()
}

// composePair returns the primary composite of a starter and the character after it, if there
// is one.
func composePair(starter, r rune) (rune, bool) {
	if norm.NFC.PropertiesString(string(r)).BoundaryBefore() {
		return 0, false // r never combines with what is before it
	}
	c := norm.NFC.String(string(starter) + string(r))
	composite, size := utf8.DecodeRuneInString(c)
	return composite, size == len(c)
}
