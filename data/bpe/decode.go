package bpe

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids through the tokenizer's decoder (special tokens included, as
// their text). Ids without a token are skipped. Unlike transformers' default for some tokenizers,
// no "clean up of tokenization spaces" is applied, so Decode(Encode(s, false)) == s for the
// tokenizers of the three reference files whenever the normalizer keeps s (NFC text for Qwen).
func (t *Tokenizer) Decode(ids []int) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if tok, ok := t.Token(id); ok {
			toks = append(toks, tok)
		}
	}
	for _, d := range t.decoders {
		toks = d(toks)
	}
	return strings.Join(toks, "")
}

// decoder reads the decoder: Sequence, Replace (string pattern), ByteFallback, Fuse, Strip,
// ByteLevel, Metaspace.
func (l *loader) decoder(t *Tokenizer, raw json.RawMessage, field string) ([]decodeStep, error) {
	if !isSet(raw) {
		return nil, nil
	}
	typ, err := l.typeOf(raw, field)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		return sequence(l, raw, field, "decoders", func(item json.RawMessage, f string) ([]decodeStep, error) {
			return l.decoder(t, item, f)
		})
	case "Replace":
		from, to, err := l.replace(raw, field)
		if err != nil {
			return nil, err
		}
		return []decodeStep{func(toks []string) []string {
			for i, s := range toks {
				toks[i] = strings.ReplaceAll(s, from, to)
			}
			return toks
		}}, nil
	case "ByteFallback":
		return []decodeStep{decodeByteFallback}, nil
	case "Fuse":
		return []decodeStep{func(toks []string) []string { return []string{strings.Join(toks, "")} }}, nil
	case "Strip":
		var c struct {
			Content *string `json:"content"`
			Start   int     `json:"start"`
			Stop    int     `json:"stop"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, l.errf(field, "%v", err)
		}
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, l.errf(field+".content", "want one character")
		}
		if c.Start < 0 || c.Stop < 0 {
			return nil, l.errf(field, "start %d, stop %d", c.Start, c.Stop)
		}
		ch := *c.Content
		return []decodeStep{func(toks []string) []string {
			for i, s := range toks {
				for n := 0; n < c.Start && strings.HasPrefix(s, ch); n++ {
					s = s[len(ch):]
				}
				for n := 0; n < c.Stop && strings.HasSuffix(s, ch); n++ {
					s = s[:len(s)-len(ch)]
				}
				toks[i] = s
			}
			return toks
		}}, nil
	case "ByteLevel":
		return []decodeStep{func(toks []string) []string { return t.decodeByteLevel(toks) }}, nil
	case "Metaspace":
		var c struct {
			Replacement    *string `json:"replacement"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			PrependScheme  *string `json:"prepend_scheme"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, l.errf(field, "%v", err)
		}
		if c.Replacement == nil || *c.Replacement == "" {
			return nil, l.errf(field+".replacement", "missing or empty")
		}
		rep := *c.Replacement
		strip := true
		if c.PrependScheme != nil {
			strip = *c.PrependScheme != "never"
		} else if c.AddPrefixSpace != nil {
			strip = *c.AddPrefixSpace
		}
		return []decodeStep{func(toks []string) []string {
			for i, s := range toks {
				s = strings.ReplaceAll(s, rep, " ")
				if i == 0 && strip {
					s = strings.TrimPrefix(s, " ")
				}
				toks[i] = s
			}
			return toks
		}}, nil
	}
	return nil, l.errf(field+".type", "decoder %q is not supported (supported: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace)", typ)
}

// decodeByteFallback turns each run of <0xNN> tokens into the text of its bytes.
func decodeByteFallback(toks []string) []string {
	out := toks[:0:0]
	var run []byte
	flush := func() {
		if len(run) > 0 {
			out = append(out, lossyUTF8(run))
			run = run[:0]
		}
	}
	for _, s := range toks {
		if b, ok := byteToken(s); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, s)
	}
	flush()
	return out
}

// byteToken parses "<0xNN>".
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range s[3:5] {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | byte(c-'0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | byte(c-'A'+10)
		case c >= 'a' && c <= 'f':
			b = b<<4 | byte(c-'a'+10)
		default:
			return 0, false
		}
	}
	return b, true
}

// decodeByteLevel maps byte-level characters back to bytes; added tokens are kept as they are.
func (t *Tokenizer) decodeByteLevel(toks []string) []string {
	var out []string
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			out = append(out, lossyUTF8(buf))
			buf = buf[:0]
		}
	}
	for _, s := range toks {
		if t.isAdded(s) {
			flush()
			out = append(out, s)
			continue
		}
		for _, r := range s {
			if b, ok := unicodeToByte(r); ok {
				buf = append(buf, b)
			} else {
				buf = utf8.AppendRune(buf, r)
			}
		}
	}
	flush()
	return out
}

// isAdded reports whether tok is an added token.
func (t *Tokenizer) isAdded(tok string) bool {
	id, ok := t.vocab[tok]
	if !ok {
		return false
	}
	_, ok = t.addedByID[id]
	return ok
}

// lossyUTF8 decodes b, replacing each maximal ill-formed subsequence by one U+FFFD (the WHATWG
// and Rust from_utf8_lossy rule that TextDecoder follows).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.WriteRune(r)
			b = b[size:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart is the length of the ill-formed prefix of b to replace by one U+FFFD: a lead byte
// and the continuation bytes that could still have completed it, or one byte.
func maximalSubpart(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(b); i++ {
		if i == 1 && (b[i] < lo || b[i] > hi) || i > 1 && (b[i] < 0x80 || b[i] > 0xBF) {
			break
		}
	}
	return i
}
