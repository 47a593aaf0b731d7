package checkpoints

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
)

var hostileKinds = []string{"symlink", "fifo", "devzero", "dir"}

// Every file a save writes (the checkpoint, the latest pointer) and WriteFileAtomic's target is
// refused, naming it, when it is a link, FIFO, device or directory; the victim outside is
// untouched. Before, rename(2) silently replaced such an entry (or failed on a directory with
// no name of the cause).
func TestWritesRefuseHostileTargets(t *testing.T) {
	for _, kind := range hostileKinds {
		for _, name := range []string{CheckpointName(5), LatestFile, "config.yaml"} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "run")
				os.Mkdir(dir, 0o755)
				victim := filepath.Join(root, "victim.txt")
				os.WriteFile(victim, []byte("precious\n"), 0o644)
				path := filepath.Join(dir, name)
				safefiletest.Plant(t, kind, path, victim)
				var err error
				if name == "config.yaml" {
					err = WriteFileAtomic(path, []byte("x: 1\n"))
				} else {
					r := makeRun(5, 1)
					err = SaveCheckpoint(dir, 5, r.weights, r.state, r.meta)
				}
				if err == nil || !strings.Contains(err.Error(), path) {
					t.Fatalf("write over a %s: %v, want a refusal naming %s", kind, err, path)
				}
				if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
					t.Fatalf("victim is now %q", b)
				}
				if fi, err := os.Lstat(path); err != nil || (kind == "symlink" && fi.Mode()&os.ModeSymlink == 0) {
					t.Fatalf("the planted %s was replaced: %v", kind, err)
				}
			})
		}
	}
}

// A checkpoint or pointer that is a FIFO, a link to /dev/zero or a directory is refused by the
// loads without blocking (a plain open of a FIFO waits for a writer forever: on the code before
// this test, the fifo cases hang until go test's timeout).
func TestLoadsRefuseHostileFiles(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero", "dir"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			ck := filepath.Join(dir, CheckpointName(3))
			safefiletest.Plant(t, kind, ck, "")
			if _, err := LoadCheckpoint(ck); err == nil || !strings.Contains(err.Error(), ck) {
				t.Fatalf("LoadCheckpoint of a %s: %v", kind, err)
			}
			safefiletest.Plant(t, kind, filepath.Join(dir, LatestFile), "")
			if _, _, err := LatestPath(dir); err == nil || !strings.Contains(err.Error(), LatestFile) {
				t.Fatalf("LatestPath with a %s pointer: %v", kind, err)
			}
			if _, _, err := LoadLatestGood(dir); err == nil {
				t.Fatalf("LoadLatestGood with a %s pointer and checkpoint: accepted", kind)
			}
		})
	}
}
