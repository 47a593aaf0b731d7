package config

import (
	"strings"
	"testing"
)

// A key that is not a name would make the decoder drop the whole document and train the
// defaults; it is refused at its line.
func TestNonStringKeysRefused(t *testing.T) {
	for _, src := range []string{
		"name: first\n0: 1\ntrain: {steps: 3}\n",
		"name: first\ntrue: 1\n",
		"name: first\nnull: 1\n",
		"name: first\ntrain: {8: 1}\n",
	} {
		_, err := Parse("k.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "k.yaml:") || !strings.Contains(err.Error(), "a key must be a name") {
			t.Errorf("%q: %v, want a refusal of the key with its line", src, err)
		}
	}
	if _, err := Parse("k.yaml", []byte("name: first\n\"0\": 1\n")); err == nil || strings.Contains(err.Error(), "a key must be a name") {
		t.Errorf("a quoted key is a name (and unknown): %v", err)
	}
}
