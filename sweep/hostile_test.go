package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
)

// A cell that gives a section as a nested mapping changes the keys it names and keeps the base's
// other keys of that section, exactly like the same keys written dotted. Before, the mapping
// replaced the whole section, so {train: {steps: 4}} ran with the default batch size, warmup,
// log and eval intervals.
func TestNestedCellMergesIntoTheBase(t *testing.T) {
	for _, cell := range []string{
		"{train: {steps: 4, warmup_steps: 1}}",
		"{train: {steps: 4}, train.warmup_steps: 1}",
		"{store: {synth: {texts: 150}}, train: {steps: 4, warmup_steps: 1}}",
	} {
		nested := mustParse(t, tinyBase+"cells:\n  - "+cell+"\n")
		dotted := mustParse(t, tinyBase+"cells:\n  - {train.steps: 4, train.warmup_steps: 1}\n")
		got, want := nested.Cells[0].Config, dotted.Cells[0].Config
		if strings.Contains(cell, "texts") {
			want.Store.Synth.Texts = 150
		}
		got.Name, want.Name, got.Source, want.Source = "", "", "", ""
		if d := ConfigDiff(got, want); d != "" || got.Train.BatchSize != 4 || got.Train.LogEvery != 2 {
			t.Errorf("cell %s: differs from the dotted cell at %s (batch %d, log_every %d)", cell, d, got.Train.BatchSize, got.Train.LogEvery)
		}
	}
}

// One field set by a dotted key and by a nested mapping in the same cell is refused naming both
// (before: the cell was named steps=4 and ran 5 steps).
func TestDottedAndNestedKeyConflict(t *testing.T) {
	for _, cell := range []string{
		"{train.steps: 4, train: {steps: 5}}",
		"{train: {steps: 5}, train.steps: 4}",
		"{store.synth.texts: 100, store: {synth: {texts: 120}}}",
	} {
		_, err := Parse("sw.yaml", []byte(tinyBase+"cells:\n  - "+cell+"\n"))
		if err == nil || !strings.Contains(err.Error(), "set twice") {
			t.Errorf("cell %s: %v, want a conflict", cell, err)
			continue
		}
		for _, w := range []string{"sw.yaml", "train.steps|store.synth.texts"} {
			ok := false
			for _, alt := range strings.Split(w, "|") {
				ok = ok || strings.Contains(err.Error(), alt)
			}
			if !ok {
				t.Errorf("cell %s: %q does not name %s", cell, err, w)
			}
		}
	}
}

// A sweep name that would leave sweeps/ (".." made `sweep` write into the current directory) or
// hide its directory is refused; a file name that is not a safe name gives a sanitised default.
func TestSweepNameCannotEscape(t *testing.T) {
	for _, n := range []string{"..", ".", "../x", "a/b", ".hidden", "-flag", `"a b"`} {
		_, err := Parse("sw.yaml", []byte("name: "+n+"\n"+tinyBase+"axes:\n  seed: [1, 2]\n"))
		if err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("name %s: %v, want a refusal", n, err)
		}
	}
	for _, file := range []string{"..yaml", ".yaml", "my sweep.yaml", "dir/...yaml"} {
		sw, err := Parse(file, []byte(tinyBase+"axes:\n  seed: [1, 2]\n"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if strings.ContainsAny(sw.Name, `/\`) || sw.Name == "" || sw.Name == "." || sw.Name == ".." || filepath.Clean(filepath.Join("sweeps", sw.Name)) == "sweeps" ||
			!strings.HasPrefix(filepath.Clean(filepath.Join("sweeps", sw.Name)), "sweeps/") {
			t.Errorf("file %s: default name %q", file, sw.Name)
		}
	}
}

// The files a sweep directory holds that a run reads (plan.json, a cell's config.yaml,
// error.txt) are refused without blocking when they are FIFOs, /dev/zero or directories, and the
// plan is never written through a link.
func TestSweepFilesRefuseHostileEntries(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero", "dir", "symlink"} {
		dir := t.TempDir()
		victim := filepath.Join(t.TempDir(), "victim.txt")
		os.WriteFile(victim, []byte("precious\n"), 0o644)
		p := filepath.Join(dir, PlanFile)
		safefiletest.Plant(t, kind, p, victim)
		if _, err := ReadPlan(dir); kind != "symlink" && (err == nil || !strings.Contains(err.Error(), p)) {
			t.Errorf("ReadPlan of a %s: %v", kind, err)
		}
		if err := writePlan(dir, Plan{}); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("writePlan over a %s: %v", kind, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("%s: victim is now %q", kind, b)
		}
	}
}
