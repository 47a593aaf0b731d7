package bpe

import "strings"

// GPT-2's byte-to-unicode map: the printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes, in increasing order, become U+0100, U+0101, ... so that every
// byte is a visible, non-space character (a space is "Ġ", U+0120).
var byteToRune, runeToByte = func() (fwd [256]rune, back [324]int16) {
	for i := range back {
		back[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			fwd[b] = rune(b)
		} else {
			fwd[b] = 256 + n
			n++
		}
		back[fwd[b]] = int16(b)
	}
	return fwd, back
}()

// byteMap maps each byte of s to its character.
func byteMap(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// unicodeToByte is the inverse of the byte map.
func unicodeToByte(r rune) (byte, bool) {
	if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
		return 0, false
	}
	return byte(runeToByte[r]), true
}
