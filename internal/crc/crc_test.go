package crc

import (
	"hash/crc32"
	"testing"
)

// The known answer of CRC-32C ("123456789" -> e3069283, RFC 3720 appendix B.4) and the text form.
func TestKnownAnswerAndHex(t *testing.T) {
	c := crc32.Checksum([]byte("123456789"), Castagnoli)
	if Hex(c) != "e3069283" || !IsHex(Hex(c)) {
		t.Fatalf("crc32c(123456789) = %s", Hex(c))
	}
	for _, s := range []string{"E3069283", "e306928", "e30692830", "e306928g", ""} {
		if IsHex(s) {
			t.Errorf("IsHex(%q) = true", s)
		}
	}
}
