package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/sweep"
)

// seedRunDir writes a run of a two-cell sweep ("s", cells scale=1 and scale=4, each setting
// sampler.shield_scale) with seed, as `sweep -seed N -out dir` leaves it: the plan, and for each
// cell named in finish its config.yaml (edited by edit, when not nil) and report.json.
func seedRunDir(t *testing.T, dir string, seed uint64, finish []string, edit func(cell string, c *config.Run)) {
	t.Helper()
	scales := map[string]float64{"scale=1": 1, "scale=4": 4}
	plan := sweep.Plan{Sweep: "s"}
	for _, name := range []string{"scale=1", "scale=4"} {
		plan.Cells = append(plan.Cells, sweep.PlanCell{Name: name,
			Settings: []sweep.PlanSetting{{Path: "sampler.shield_scale", Value: scales[name]}}})
	}
	b, _ := json.MarshalIndent(plan, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, sweep.PlanFile), b)
	for _, name := range finish {
		cdir := filepath.Join(dir, name)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.Name, cfg.OutDir, cfg.Seed, cfg.Sampler.Seed = name, cdir, seed, seed
		cfg.Sampler.ShieldScale = gelo.Fixed(scales[name])
		if edit != nil {
			edit(name, &cfg)
		}
		y, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(cdir, sweep.ConfigFile), y)
		r, _ := json.Marshal(map[string]any{"steps": 200, "final": retrieval(0.5, 0.4+float64(seed)/100, 0.02, 0.5, 0.3)})
		write(t, filepath.Join(cdir, sweep.ReportFile), r)
	}
}

var both = []string{"scale=1", "scale=4"}

// CollectSeeds merges runs of one sweep with distinct seeds (the configs differ in the seeds, the
// names and the directories only), and refuses anything else naming what differs: another sweep
// or plan, another task or base config (of the same cell, or of cells finished in different
// directories), the same seed twice, a directory named twice, a cell directory that is a link.
// Before, `report DIR DIR...` merged whatever it was given.
func TestCollectSeedsMergesOnlySeedsOfOneSweep(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "s1"), filepath.Join(root, "s2"), filepath.Join(root, "s3")}
	for i, d := range dirs {
		seedRunDir(t, d, uint64(i+1), both, nil)
	}
	rs, err := CollectSeeds(dirs)
	if err != nil {
		t.Fatalf("three seeds of one sweep: %v", err)
	}
	if rows := Seeds(rs); len(rows) != 2 || len(rows[0].Val) != 3 {
		t.Fatalf("seed rows %+v (unfinished %+v)", rows, rs[0].Unfinished)
	}

	unmix := func(cell string, c *config.Run) {
		if cell == "scale=4" {
			c.Model.Task, c.Model.DecLayers, c.Model.Slots = settransformer.TaskUnmix, 1, 4
		}
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, a, b string) // writes the two directories
		args  func(a, b string) []string
		want  []string
	}{
		{"another sweep", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, both, nil)
			seedRunDir(t, b, 2, both, nil)
			p := filepath.Join(b, sweep.PlanFile)
			src, _ := os.ReadFile(p)
			write(t, p, []byte(strings.Replace(string(src), `"sweep": "s"`, `"sweep": "other"`, 1)))
		}, nil, []string{"not runs of one sweep", `sweep "s"`, `"other"`}},
		{"another plan", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, both, nil)
			seedRunDir(t, b, 2, both, nil)
			p := filepath.Join(b, sweep.PlanFile)
			src, _ := os.ReadFile(p)
			write(t, p, []byte(strings.Replace(string(src), `"value": 4`, `"value": 8`, 1)))
		}, nil, []string{"not runs of one sweep", "cell scale=4", `"value":8`}},
		{"another task", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, both, nil)
			seedRunDir(t, b, 2, both, unmix)
		}, nil, []string{"cell scale=4", "model.task is retrieval in", "unmix in"}},
		{"another base (sweep -steps)", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, both, nil)
			seedRunDir(t, b, 2, both, func(_ string, c *config.Run) { c.Train.Steps = 900 })
		}, nil, []string{"train.steps is 600 in", "900 in"}},
		{"another base in cells finished apart", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, []string{"scale=1"}, nil)
			seedRunDir(t, b, 2, []string{"scale=4"}, func(_ string, c *config.Run) { c.Store.Path = "/other/store" })
		}, nil, []string{"differ in the base", "store.path"}},
		{"the same seed twice", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 5, both, nil)
			seedRunDir(t, b, 5, both, nil)
		}, nil, []string{"with seed 5", "same seed twice"}},
		{"the same seed in cells finished apart", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 5, []string{"scale=1"}, nil)
			seedRunDir(t, b, 5, []string{"scale=4"}, nil)
		}, nil, []string{"both ran the sweep with seed 5"}},
		{"one directory twice", func(t *testing.T, a, _ string) {
			seedRunDir(t, a, 1, both, nil)
		}, func(a, _ string) []string { return []string{a, a + "/."} }, []string{"the same directory"}},
		{"a cell directory that is a link", func(t *testing.T, a, b string) {
			seedRunDir(t, a, 1, both, nil)
			seedRunDir(t, b, 2, []string{"scale=1"}, nil)
			other := filepath.Join(filepath.Dir(b), "elsewhere")
			seedRunDir(t, other, 3, both, nil)
			if err := os.Symlink(filepath.Join(other, "scale=4"), filepath.Join(b, "scale=4")); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"scale=4 is a symbolic link", "refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			c.setup(t, a, b)
			args := []string{a, b}
			if c.args != nil {
				args = c.args(a, b)
			}
			_, err := CollectSeeds(args)
			if err == nil {
				t.Fatalf("merged %v", args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal lacks %q: %v", w, err)
				}
			}
		})
	}
}

// Collect refuses a sweep one of whose cell directories is a link (with a plan, or found by
// listing the directory), rather than reporting the linked run as the sweep's.
func TestCollectRefusesALinkedCellDirectory(t *testing.T) {
	root := t.TempDir()
	dir, other := filepath.Join(root, "sweep"), filepath.Join(root, "other")
	seedRunDir(t, dir, 1, []string{"scale=1"}, nil)
	seedRunDir(t, other, 1, both, nil)
	if err := os.Symlink(filepath.Join(other, "scale=4"), filepath.Join(dir, "scale=4")); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("with a plan: %v, want the linked cell refused", err)
	}
	if err := os.Remove(filepath.Join(dir, sweep.PlanFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("without a plan: %v, want the linked cell refused", err)
	}
}

// Directories without a plan (cells copied together by hand) merge as seeds of one sweep when their
// cells match: the fields that differ between a directory's cells are the cells' settings, the
// rest the base.
func TestCollectSeedsWithoutPlans(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	seedRunDir(t, a, 1, both, nil)
	seedRunDir(t, b, 2, both, nil)
	for _, d := range []string{a, b} {
		if err := os.Remove(filepath.Join(d, sweep.PlanFile)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := CollectSeeds([]string{a, b}); err != nil {
		t.Fatalf("two seeds without plans: %v", err)
	}
	seedRunDir(t, b, 2, both, func(_ string, c *config.Run) { c.Train.LR = 0.5 })
	if err := os.Remove(filepath.Join(b, sweep.PlanFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := CollectSeeds([]string{a, b}); err == nil || !strings.Contains(err.Error(), "train.lr") {
		t.Fatalf("another train.lr without plans: %v", err)
	}
}
