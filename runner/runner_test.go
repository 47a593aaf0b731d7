package runner

import (
	"path/filepath"
	"testing"
)

func TestExpandPath(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("GELOATTACK_CACHE", "/c")
	for in, want := range map[string]string{
		"~/.cache/s":            filepath.Join("/home/u", ".cache/s"),
		"$GELOATTACK_CACHE/s":   "/c/s",
		"${GELOATTACK_CACHE}/s": "/c/s",
		"/abs/s":                "/abs/s",
		"rel/~/s":               "rel/~/s",
	} {
		if got := ExpandPath(in); got != want {
			t.Errorf("ExpandPath(%q) = %q, want %q", in, got, want)
		}
	}
}
