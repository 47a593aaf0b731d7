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
	// Unset, $GELOATTACK_CACHE is the default cache the scripts write to.
	t.Setenv("GELOATTACK_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	if got, want := ExpandPath("$GELOATTACK_CACHE/s"), "/x/geloattack/s"; got != want {
		t.Errorf("ExpandPath with GELOATTACK_CACHE unset = %q, want %q", got, want)
	}
}
