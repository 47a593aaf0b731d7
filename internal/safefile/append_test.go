package safefile

import (
	"os"
	"path/filepath"
	"testing"
)

// AppendSync adds each record after the last, creates the file, and refuses what CheckOutput
// refuses: a link, a missing directory, an input the door has read.
func TestAppendSync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.jsonl")
	f := new(Files)
	for _, rec := range []string{"{\"a\":1}\n", "{\"b\":2}\n"} {
		if err := f.AppendSync(path, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("file holds %q", got)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := f.AppendSync(link, []byte("x\n")); err == nil {
		t.Error("appended through a symbolic link")
	}
	if err := f.AppendSync(filepath.Join(dir, "nosuch", "r.jsonl"), []byte("x\n")); err == nil {
		t.Error("appended into a missing directory")
	}
	in := filepath.Join(dir, "texts.jsonl")
	if err := os.WriteFile(in, []byte("t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(in, Provenance); err != nil {
		t.Fatal(err)
	}
	if err := f.AppendSync(in, []byte("x\n")); err == nil {
		t.Error("appended to a file the door read as an input")
	}
	if got, _ := os.ReadFile(path); string(got) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("a refused append changed the file: %q", got)
	}
}
