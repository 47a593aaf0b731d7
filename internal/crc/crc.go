// Package crc is the one CRC-32C (Castagnoli) convention of checkpoints and stores: the table and
// the stored text form, 8 lowercase hex digits.
package crc

import (
	"fmt"
	"hash/crc32"
)

// Castagnoli is the CRC-32C table; hash/crc32 uses the CPU's CRC instruction when there is one.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Hex formats a checksum as stored: 8 lowercase hex digits.
func Hex(c uint32) string { return fmt.Sprintf("%08x", c) }

// IsHex reports whether s is exactly as Hex writes it. Upper-case digits are refused too, so that
// a flipped case bit in a stored checksum is reported rather than read as the same value.
func IsHex(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
