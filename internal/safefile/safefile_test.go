package safefile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// hostile makes, in dir, each kind of path a hostile directory can hold where a file is expected,
// and returns them by name; victim is a regular file outside the directory.
func hostile(t *testing.T) (paths map[string]string, victim string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(root, "victim.txt")
	if err := os.WriteFile(victim, []byte("victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths = map[string]string{
		"fifo":    filepath.Join(dir, "fifo"),
		"symlink": filepath.Join(dir, "link"),
		"zero":    filepath.Join(dir, "zero"),
		"dir":     filepath.Join(dir, "sub"),
	}
	if err := syscall.Mkfifo(paths["fifo"], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, paths["symlink"]); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", paths["zero"]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(paths["dir"], 0o755); err != nil {
		t.Fatal(err)
	}
	return paths, victim
}

// Every hostile path is refused by the reads without blocking, naming the path; the writes refuse
// them too and leave the victim alone. A FIFO open would block forever before this package.
func TestHostilePathsAreRefused(t *testing.T) {
	paths, victim := hostile(t)
	for name, p := range paths {
		_, rerr := ReadFile(p, 1<<20)
		_, nerr := ReadFileNoFollow(p, 1<<20)
		f, aerr := OpenAppend(p, 0o644)
		if f != nil {
			f.Write([]byte("x"))
			f.Close()
		}
		l, lerr := OpenLock(p, 0o644)
		if l != nil {
			l.Truncate(0)
			l.Close()
		}
		cerr := CheckTarget(p)
		c, crerr := Create(p, 0o644)
		if c != nil {
			c.Write([]byte("x"))
			c.Close()
		}
		for what, err := range map[string]error{"ReadFileNoFollow": nerr, "OpenAppend": aerr, "OpenLock": lerr, "CheckTarget": cerr, "Create": crerr} {
			if err == nil {
				t.Errorf("%s %s: accepted", what, name)
			} else if !strings.Contains(err.Error(), p) {
				t.Errorf("%s %s: %v does not name the path", what, name, err)
			}
		}
		// ReadFile follows links: the link to a regular file reads it, every other is refused.
		if name == "symlink" {
			if rerr != nil {
				t.Errorf("ReadFile through a link to a regular file: %v", rerr)
			}
		} else if !errors.Is(rerr, ErrNotRegular) {
			t.Errorf("ReadFile %s: %v, want ErrNotRegular", name, rerr)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("victim changed: %q", b)
	}
}

func TestReadFileBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meta.json")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if b, err := ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if _, err := ReadFile(p, 9); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := ReadFile(p+".missing", 9); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if err := CheckTarget(p + ".missing"); err != nil {
		t.Fatalf("CheckTarget of a missing file: %v", err)
	}
	if err := CheckTarget(p); err != nil {
		t.Fatalf("CheckTarget of a regular file: %v", err)
	}
}

// A FIFO nobody writes reads as empty through OpenStream instead of blocking; one with a writer
// reads the writer's bytes; a directory is refused.
func TestOpenStream(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenStream(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil || len(b) != 0 {
		t.Fatalf("FIFO without a writer: %q %v", b, err)
	}
	if _, err := OpenStream(dir); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
}
