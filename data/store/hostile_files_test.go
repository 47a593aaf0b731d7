package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
)

// Every file a store open reads (meta.json, tokens.arrow, texts.arrow) replaced by a FIFO, a link
// to a file outside the store, a link to /dev/zero or a directory is refused naming the file,
// without blocking and without reading without bound. Before, a FIFO blocked Open forever (the
// regular-file check came after the open) and /dev/zero as meta.json was read until memory ran
// out; on that code this test hangs in the fifo cases.
func TestOpenRefusesHostileFiles(t *testing.T) {
	const d, e = 4, 4
	src := t.TempDir()
	writeStore(t, src, Meta{D: d, E: e, DType: Float16, Norm: NormRaw}, baseTexts(d, e), 3*d*2)
	for _, name := range []string{MetaFile, TokensFile, TextsFile} {
		for _, kind := range []string{"fifo", "symlink", "devzero", "dir"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "store")
				if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
					t.Fatal(err)
				}
				victim := filepath.Join(root, "victim.txt")
				os.WriteFile(victim, []byte("not a store file\n"), 0o644)
				p := filepath.Join(dir, name)
				os.Remove(p)
				safefiletest.Plant(t, kind, p, victim)
				s, err := Open(dir)
				if err == nil {
					s.Close()
					t.Fatalf("Open accepted %s as a %s", name, kind)
				}
				if !strings.Contains(err.Error(), name) {
					t.Errorf("refusal %q does not name %s", err, name)
				}
				if b, _ := os.ReadFile(victim); string(b) != "not a store file\n" {
					t.Errorf("victim changed: %q", b)
				}
			})
		}
	}
}

// A meta.json larger than its limit (internal/safefile's kind StoreMeta) is refused naming the file
// and the limit.
func TestOpenRefusesHugeMeta(t *testing.T) {
	const d, e = 4, 4
	dir := t.TempDir()
	writeStore(t, dir, Meta{D: d, E: e, DType: Float16, Norm: NormRaw}, baseTexts(d, e), 3*d*2)
	b, _ := os.ReadFile(filepath.Join(dir, MetaFile))
	big := append(b[:len(b)-2], []byte(strings.Repeat(" ", int(safefile.StoreMeta.Limit())))...)
	os.WriteFile(filepath.Join(dir, MetaFile), append(big, '}', '\n'), 0o644)
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), MetaFile) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("huge meta.json: %v", err)
	}
}

// The temporaries a store writer creates (.tokens.arrow.tmp, .texts.arrow.tmp, .meta.json.tmp)
// planted as links to a file outside, FIFOs or directories are refused naming them; the victim
// keeps its content. Before, os.Create truncated a link's target.
func TestWriterRefusesHostileTemporaries(t *testing.T) {
	const d, e = 4, 4
	for _, name := range []string{"." + TokensFile + ".tmp", "." + TextsFile + ".tmp", "." + MetaFile + ".tmp"} {
		for _, kind := range []string{"symlink", "fifo", "dir"} {
			root := t.TempDir()
			dir := filepath.Join(root, "store")
			os.Mkdir(dir, 0o755)
			victim := filepath.Join(root, "victim.txt")
			os.WriteFile(victim, []byte("precious\n"), 0o644)
			p := filepath.Join(dir, name)
			safefiletest.Plant(t, kind, p, victim)
			w, err := Create(dir, Meta{D: d, E: e, DType: Float16, Norm: NormRaw})
			if err == nil {
				for _, tx := range baseTexts(d, e) {
					if err = w.AddText(tx.id, tx.text, tx.hasText, tx.tokens, tx.rows, tx.emb); err != nil {
						break
					}
				}
				if err == nil {
					err = w.Close()
				} else {
					w.Abort()
				}
			}
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s as a %s: %v, want a refusal naming it", name, kind, err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Errorf("%s as a %s: victim is now %q", name, kind, b)
			}
		}
	}
}
