package bpe

import (
	"encoding/json"

	"golang.org/x/text/unicode/norm"
)

// normUnicode is one of the NFC, NFD, NFKC and NFKD normalizers (Qwen's NFC); they have no
// settings.
type normUnicode struct {
	form norm.Form
}

// newNormUnicode returns the constructor of the normalizer to form.
func newNormUnicode(form norm.Form) constructor[normalizer] {
	return func(*build, json.RawMessage, string) (normalizer, error) {
		return normUnicode{form: form}, nil
	}
}

// Normalize returns s in the normalization form.
func (n normUnicode) Normalize(s string) string { return n.form.String(s) }
