// Package safefiletest plants the hostile file-system entries that the tests of every package
// which opens or writes files refuse: links out of the tree, FIFOs, /dev/zero, directories.
package safefiletest

import (
	"os"
	"syscall"
	"testing"
)

// Plant makes path an entry of kind: "symlink" (a symbolic link to victim, as given, so a relative
// victim stays relative), "fifo", "devzero" (a link to /dev/zero) or "dir" (an empty directory).
func Plant(t testing.TB, kind, path, victim string) {
	t.Helper()
	var err error
	switch kind {
	case "symlink":
		err = os.Symlink(victim, path)
	case "fifo":
		err = syscall.Mkfifo(path, 0o644)
	case "devzero":
		err = os.Symlink("/dev/zero", path)
	case "dir":
		err = os.Mkdir(path, 0o755)
	default:
		t.Fatalf("unknown hostile entry kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}
