package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/sweep"
)

// handSeedRun writes a finished one-cell sweep named name with seed into dir, as `sweep -seed N
// -out dir` leaves it.
func handSeedRun(t *testing.T, dir, name string, seed uint64) {
	t.Helper()
	cell := filepath.Join(dir, "R1")
	if err := os.MkdirAll(cell, 0o755); err != nil {
		t.Fatal(err)
	}
	plan, _ := json.Marshal(sweep.Plan{Sweep: name, Cells: []sweep.PlanCell{{Name: "R1", Settings: []sweep.PlanSetting{}, Label: "R1"}}})
	cfg := config.Default()
	cfg.Name, cfg.Seed, cfg.Sampler.Seed = "R1", seed, seed
	y, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := json.Marshal(map[string]any{"steps": 600, "final": map[string]map[string]float64{
		"val": {"pos_mass": 0.3, "pos_mass_chance": 0.07}}})
	for p, b := range map[string][]byte{filepath.Join(dir, sweep.PlanFile): plan, filepath.Join(cell, sweep.ConfigFile): y,
		filepath.Join(cell, sweep.ReportFile): rep} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// `report DIR DIR...` merges only runs of one sweep with distinct seeds: two seeds are one table,
// while two sweeps, the same seed twice or a linked cell directory are refused with exit status
// 1 naming what differs. Before, each printed a seeds table.
func TestReportSeedsRefusesWhatIsNotOneSweep(t *testing.T) {
	root := t.TempDir()
	d := func(n string) string { return filepath.Join(root, n) }
	handSeedRun(t, d("s1"), "grid", 1)
	handSeedRun(t, d("s2"), "grid", 2)
	handSeedRun(t, d("again"), "grid", 1)
	handSeedRun(t, d("other"), "another-grid", 3)
	handSeedRun(t, d("linked"), "grid", 4)
	if err := os.RemoveAll(filepath.Join(d("linked"), "R1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d("s2"), "R1"), filepath.Join(d("linked"), "R1")); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, "report", d("s1"), d("s2")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Cells finished in all 2 directories: 1") {
		t.Fatalf("two seeds of one sweep: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"two sweeps", []string{d("s1"), d("other")}, `sweep "grid"`},
		{"the same seed twice", []string{d("s1"), d("s2"), d("again")}, "with seed 1"},
		{"a linked cell", []string{d("s1"), d("linked")}, "symbolic link"},
	} {
		out, err := cli(t, append([]string{"report"}, c.dirs...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "| cell |") {
			t.Errorf("%s: %v, want a refusal naming %q and no table:\n%s", c.name, err, c.want, out)
		}
	}
}
