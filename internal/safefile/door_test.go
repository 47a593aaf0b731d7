package safefile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every kind has a name and a positive limit, and each is read one way.
func TestKindTable(t *testing.T) {
	for k := Kind(1); k < numKinds; k++ {
		s := table[k]
		if s.name == "" || k.Limit() <= 0 {
			t.Errorf("kind %d: name %q, limit %d", k, s.name, k.Limit())
		}
		if (s.how == lines) != (s.line > 0) || (s.how != lines) != (s.max > 0) {
			t.Errorf("kind %s: how %d with max %d and line %d", k, s.how, s.max, s.line)
		}
	}
}

// within fails the test when fn takes longer than a second: a refusal must come at once, not
// after a FIFO's writer or the end of /dev/zero.
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatalf("%s: still running after a second (blocked or reading forever)", what)
		return nil
	}
}

// A FIFO, /dev/zero and a directory are refused at once by every read of every kind, naming the
// path; a link to a regular file is followed by Read and refused by ReadNoFollow.
func TestReadRefusesHostilePaths(t *testing.T) {
	paths, victim := hostile(t)
	for name, p := range paths {
		for _, k := range []Kind{TokenizerJSON, ModelConfig, ShardIndex, Pointer} {
			err := within(t, name+" "+k.String(), func() error { _, err := Read(p, k); return err })
			if name == "symlink" {
				if err != nil {
					t.Errorf("Read(%s) through a link to a regular file: %v", k, err)
				}
			} else if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("Read(%s) of a %s: %v, want ErrNotRegular naming the path", k, name, err)
			}
			if _, err := ReadNoFollow(p, k); err == nil {
				t.Errorf("ReadNoFollow(%s) of a %s: accepted", k, name)
			}
		}
		err := within(t, name+" lines", func() error { _, err := Lines(p, Texts); return err })
		if name != "symlink" && !errors.Is(err, ErrNotRegular) {
			t.Errorf("Lines of a %s: %v", name, err)
		}
		err = within(t, name+" weights", func() error { _, _, err := OpenRead(p, Weights); return err })
		if name != "symlink" && !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenRead(Weights) of a %s: %v", name, err)
		}
	}
	// A config may be a pipe: a FIFO without a writer reads as empty, /dev/zero stops at the limit.
	if b, err := Read(paths["fifo"], Config); err != nil || len(b) != 0 {
		t.Errorf("Config from a FIFO without a writer: %q %v", b, err)
	}
	if _, err := Read(paths["zero"], Config); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Config from /dev/zero: %v, want ErrTooLarge", err)
	}
	if _, err := Read(paths["dir"], Config); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Config that is a directory: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("victim changed: %q", b)
	}
}

// A file over its kind's limit is refused naming the file, its size, the limit and the kind.
func TestReadLimitPerKind(t *testing.T) {
	p := filepath.Join(t.TempDir(), "latest")
	os.WriteFile(p, bytes.Repeat([]byte("x"), 256), 0o644)
	if b, err := Read(p, Pointer); err != nil || len(b) != 256 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	os.WriteFile(p, bytes.Repeat([]byte("x"), 257), 0o644)
	_, err := Read(p, Pointer)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	for _, want := range []string{p, "257 bytes", "256 bytes", Pointer.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %q", err, want)
		}
	}
	if _, err := Read(p, Texts); err == nil {
		t.Error("Read of a streamed kind: accepted")
	}
	if _, err := Lines(p, TokenizerJSON); err == nil {
		t.Error("Lines of a whole kind: accepted")
	}
	if _, err := Read(p+".missing", Pointer); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// Lines gives the file's bytes line by line, the last one without its newline too, and refuses a
// line over the limit as soon as the limit is passed, naming the file and line.
func TestLines(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "texts.txt")
	src := "one\n\ntwo\r\nthree"
	os.WriteFile(p, []byte(src), 0o644)
	lr, err := Lines(p, Texts)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	n := 0
	for {
		b, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if lr.Line() != n {
			t.Fatalf("line %d numbered %d", n, lr.Line())
		}
		all = append(all, b...)
	}
	lr.Close()
	if string(all) != src || n != 4 {
		t.Fatalf("%d lines %q, want 4 making %q", n, all, src)
	}
	// Candidates: 64 KiB a line. A line of exactly the limit passes, one byte more is refused,
	// with and without a newline after it.
	max := int(Candidates.Limit())
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{strings.Repeat("a", max) + "\nb\n", true},
		{strings.Repeat("a", max), true},
		{"ok\n" + strings.Repeat("a", max+1) + "\n", false},
		{"ok\n" + strings.Repeat("a", max+1), false},
		{"ok\n" + strings.Repeat("a", 10*max), false},
	} {
		os.WriteFile(p, []byte(c.body), 0o644)
		lr, err := Lines(p, Candidates)
		if err != nil {
			t.Fatal(err)
		}
		var lerr error
		for {
			if _, err := lr.Next(); err != nil {
				if err != io.EOF {
					lerr = err
				}
				break
			}
		}
		lr.Close()
		if c.ok && lerr != nil {
			t.Errorf("%d bytes: %v", len(c.body), lerr)
		}
		if !c.ok && (!errors.Is(lerr, ErrLineTooLong) || !strings.Contains(lerr.Error(), p+":2:")) {
			t.Errorf("%d bytes: %v, want ErrLineTooLong at %s:2", len(c.body), lerr, p)
		}
	}
}

// WriteFileAtomic refuses a link, a FIFO and a directory at the target, naming it, and leaves the
// victim alone; a missing directory is named; nothing is left behind.
func TestWriteFileAtomicRefusals(t *testing.T) {
	paths, victim := hostile(t)
	for name, p := range paths {
		err := within(t, name, func() error { return WriteFileAtomic(p, []byte("new")) })
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("WriteFileAtomic over a %s: %v", name, err)
		}
		if err := CheckOutput(p); err == nil {
			t.Errorf("CheckOutput of a %s: accepted", name)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("victim changed: %q", b)
	}
	dir := filepath.Dir(paths["fifo"])
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	missing := filepath.Join(dir, "nosuch", "r.json")
	for _, err := range []error{CheckOutput(missing), WriteFileAtomic(missing, nil)} {
		if err == nil || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("missing directory: %v", err)
		}
	}
	if err := CheckOutput(dir + "/"); err == nil {
		t.Error("CheckOutput of a directory path: accepted")
	}
}

// A Files value refuses to write over a file it read, under its own name or another (a hard
// link), and only its own inputs; the write is refused before anything changes.
func TestWriteNeverOntoAnInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(in, []byte(`{"model":{}}`), 0o644)
	other := filepath.Join(dir, "other-name.json")
	if err := os.Link(in, other); err != nil {
		t.Fatal(err)
	}
	var files Files
	if _, err := files.Read(in, TokenizerJSON); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{in, other} {
		if err := files.WriteFileAtomic(p, nil); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p) {
			t.Errorf("write over the input as %s: %v, want ErrInput naming it", p, err)
		}
		if err := files.CheckOutput(p); !errors.Is(err, ErrInput) {
			t.Errorf("CheckOutput of the input as %s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(in); string(b) != `{"model":{}}` {
		t.Fatalf("input changed: %q", b)
	}
	// Another Files (or none) has no such input.
	var fresh Files
	if err := fresh.WriteFileAtomic(filepath.Join(dir, "out.json"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// An input becoming the target after CreateAtomic is caught at Commit.
	late := filepath.Join(dir, "late.json")
	a, err := files.CreateAtomic(late)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(late, []byte("read later"), 0o644)
	if _, err := files.Read(late, ModelConfig); err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("new"))
	if err := a.Commit(); !errors.Is(err, ErrInput) {
		t.Fatalf("commit over a file read since the create: %v", err)
	}
	if _, err := os.Stat(a.Name()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left after the refused commit: %v", err)
	}
}

// CreateAtomic leaves the old file until Commit; Abort removes the temporary file; a link planted
// at the target while writing is refused at Commit.
func TestCreateAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	os.WriteFile(p, []byte("old"), 0o600)
	a, err := CreateAtomic(p)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("new"))
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("target changed before Commit: %q", b)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	a.Abort() // nothing after Commit
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("after Commit: %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != FileMode {
		t.Fatalf("mode %v, want %v", fi.Mode().Perm(), os.FileMode(FileMode))
	}
	a, _ = CreateAtomic(p)
	a.Write([]byte("discarded"))
	a.Abort()
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("after Abort: %q", b)
	}
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("victim"), 0o644)
	a, _ = CreateAtomic(p)
	os.Remove(p)
	os.Symlink(victim, p)
	if err := a.Commit(); !errors.Is(err, ErrSymlink) {
		t.Fatalf("commit over a link planted meanwhile: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("directory holds %v, want the link and the victim", ents)
	}
}

// BeginDir builds a new directory beside its target and renames it into place whole; Abort leaves
// nothing, not even the parents it created; an occupied target is refused before any work.
func TestBeginDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "a", "b", "model")
	tx, err := BeginDir(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(tx.Path(), "config.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target visible before Commit: %v", err)
	}
	tx.Abort()
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("Abort left %v", ents)
	}

	tx, _ = BeginDir(target)
	WriteFileAtomic(filepath.Join(tx.Path(), "config.json"), []byte("{}"))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Abort() // nothing after Commit
	if b, err := os.ReadFile(filepath.Join(target, "config.json")); err != nil || string(b) != "{}" {
		t.Fatalf("committed directory: %q %v", b, err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
		t.Fatalf("directory mode %v", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(filepath.Dir(target))
	if len(ents) != 1 {
		t.Fatalf("parent holds %v, want only the target", ents)
	}

	// Occupied targets: refused naming what they hold; an empty directory is replaced.
	if _, err := BeginDir(target); err == nil || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), target) {
		t.Fatalf("non-empty target: %v", err)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(root, "link")
	os.Symlink(t.TempDir(), link)
	fifo := filepath.Join(root, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	for _, p := range []string{file, link, fifo} {
		if _, err := BeginDir(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("target %s: %v", p, err)
		}
	}
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	tx, err = BeginDir(empty)
	if err != nil {
		t.Fatal(err)
	}
	WriteFileAtomic(filepath.Join(tx.Path(), "x"), []byte("x"))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, "x")); err != nil {
		t.Fatal(err)
	}
	// A target filled while building is not overwritten: Commit refuses and removes its build.
	late := filepath.Join(root, "late")
	tx, _ = BeginDir(late)
	os.Mkdir(late, 0o755)
	os.WriteFile(filepath.Join(late, "theirs"), []byte("theirs"), 0o644)
	if err := tx.Commit(); err == nil {
		t.Fatal("commit over a directory filled meanwhile: accepted")
	}
	if _, err := os.Stat(tx.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("build left after the refused commit: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(late, "theirs")); string(b) != "theirs" {
		t.Fatal("their file changed")
	}
}

// WriteKernel writes only under /proc and /sys.
func TestWriteKernelOnlyKernelFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "clear_refs")
	os.WriteFile(p, nil, 0o644)
	if err := WriteKernel(p, []byte("5")); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("WriteKernel outside /proc: %v", err)
	}
	if err := WriteKernel("/proc/../tmp/x", nil); err == nil {
		t.Fatal("WriteKernel through /proc/..: accepted")
	}
}
