package sweep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
)

// tinyBase is a run config that trains in about a second: used inline by the tests' sweeps.
const tinyBase = `base:
  seed: 7
  store:
    synth: {texts: 200, min_tokens: 8, max_tokens: 24, d: 32, e: 16}
  sampler:
    positives: [2, 3]
    tokens_per_text: 8
    shield_frac: 0.25
  model: {task: retrieval, hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}
  train: {steps: 20, batch_size: 4, warmup_steps: 5, log_every: 2, eval_every: 10, eval_batches: 2, ckpt_every: 5, keep_ckpts: 2, workers: 1}
`

func mustParse(t *testing.T, src string) *Sweep {
	t.Helper()
	sw, err := Parse("sw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

func names(sw *Sweep) []string {
	var out []string
	for _, c := range sw.Cells {
		out = append(out, c.Name)
	}
	return out
}

func TestGridExpansionOrderNamesAndConfigs(t *testing.T) {
	sw := mustParse(t, tinyBase+`axes:
  sampler.shield_kind: [gaussian, manifold, student_t]
  sampler.shield_scale: [0.5, 2]
`)
	want := []string{
		"shield_kind=gaussian,shield_scale=0.5", "shield_kind=gaussian,shield_scale=2",
		"shield_kind=manifold,shield_scale=0.5", "shield_kind=manifold,shield_scale=2",
		"shield_kind=student_t,shield_scale=0.5", "shield_kind=student_t,shield_scale=2",
	}
	if got := names(sw); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("cells:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sw.Name != "sw" {
		t.Errorf("sweep name %q, want the file's base name", sw.Name)
	}
	c := sw.Cells[3].Config
	if c.Sampler.ShieldKind != gelo.ShieldManifold || c.Sampler.ShieldScale != gelo.Fixed(2) {
		t.Errorf("cell 4 config: kind %s scale %s", c.Sampler.ShieldKind, c.Sampler.ShieldScale)
	}
	// Everything the axes do not touch comes from the base.
	if c.Name != sw.Cells[3].Name || c.Seed != 7 || c.Sampler.Seed != 7 || c.Model.Hidden != 16 || c.Train.Steps != 20 || c.Sampler.ShieldFrac != gelo.Fixed(0.25) {
		t.Errorf("cell 4 lost base settings: %+v", c)
	}
	if c.OutDir != "" {
		t.Errorf("out_dir %q, want it cleared", c.OutDir)
	}
}

func TestCellsCrossedWithGridAndRangeNames(t *testing.T) {
	sw := mustParse(t, tinyBase+`axes:
  sampler.shield_kind: [gaussian, manifold]
cells:
  - {sampler.shield_scale: 0.25}
  - sampler.shield_frac: {min: 0.05, max: 0.5, rand: log_uniform}
    sampler.shield_scale: {min: 0.25, max: 4, rand: log_uniform}
  - {sampler.positives: [2, 4], sampler.shield_scale: [1, 2]}
`)
	want := []string{
		"shield_kind=gaussian,shield_scale=0.25",
		"shield_kind=gaussian,shield_frac=0.05-0.5_log_uniform,shield_scale=0.25-4_log_uniform",
		"shield_kind=gaussian,positives=2-4_uniform,shield_scale=1-2_uniform",
		"shield_kind=manifold,shield_scale=0.25",
		"shield_kind=manifold,shield_frac=0.05-0.5_log_uniform,shield_scale=0.25-4_log_uniform",
		"shield_kind=manifold,positives=2-4_uniform,shield_scale=1-2_uniform",
	}
	if got := names(sw); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("cells:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c := sw.Cells[4].Config.Sampler
	if c.ShieldFrac != gelo.LogUniform(0.05, 0.5) || c.ShieldScale != gelo.LogUniform(0.25, 4) || c.ShieldKind != gelo.ShieldManifold {
		t.Errorf("ranged cell: frac %s scale %s kind %s", c.ShieldFrac, c.ShieldScale, c.ShieldKind)
	}
	if p := sw.Cells[2].Config.Sampler.Positives; p != gelo.Uniform(2, 4) {
		t.Errorf("positives %s, want [2, 4]", p)
	}
}

func TestNamesAreStableAndDistinguishSharedLastKeys(t *testing.T) {
	src := tinyBase + `axes:
  seed: [1, 2]
  sampler.seed: [3]
`
	a, b := mustParse(t, src), mustParse(t, src)
	want := []string{"seed=1,sampler.seed=3", "seed=2,sampler.seed=3"}
	if strings.Join(names(a), " ") != strings.Join(want, " ") || strings.Join(names(b), " ") != strings.Join(want, " ") {
		t.Fatalf("names %v and %v, want %v", names(a), names(b), want)
	}
	if a.Cells[1].Config.Seed != 2 || a.Cells[1].Config.Sampler.Seed != 3 {
		t.Errorf("seeds %d, %d", a.Cells[1].Config.Seed, a.Cells[1].Config.Sampler.Seed)
	}
}

func TestUnsafeValuesAreSanitisedAndHashed(t *testing.T) {
	sw := mustParse(t, tinyBase+`axes:
  store.path: ["stores/a b", "stores/a_b"]
`)
	n := names(sw)
	for _, x := range n {
		if strings.ContainsAny(x, "/ ") || !strings.HasPrefix(x, "path=stores_a_b-") {
			t.Errorf("name %q: want path=stores_a_b-<hash>", x)
		}
	}
	if n[0] == n[1] {
		t.Fatalf("two different stores got one name %q", n[0])
	}
	long := mustParse(t, tinyBase+"axes:\n  store.path: [\""+strings.Repeat("x", 300)+"\"]\n")
	if l := len(long.Cells[0].Name); l > maxNameLen {
		t.Errorf("name of %d bytes, want <= %d", l, maxNameLen)
	}
}

func TestBaseAloneIsOneCell(t *testing.T) {
	sw := mustParse(t, tinyBase+"cells:\n  - {}\n")
	if len(sw.Cells) != 1 || sw.Cells[0].Name != "base" {
		t.Fatalf("cells %v", names(sw))
	}
}

func TestBaseConfigRelativeToSweepFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "paper"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := "name: paper-thing\nsampler:\n  shield_frac: 0.3\nmodel: {hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}\n"
	if err := os.WriteFile(filepath.Join(dir, "paper", "b.yaml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sweeps", "s.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("name: mine\nbase_config: ../paper/b.yaml\naxes:\n  sampler.shield_scale: [1, 3]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sw, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if sw.Name != "mine" || len(sw.Cells) != 2 {
		t.Fatalf("sweep %q with %d cells", sw.Name, len(sw.Cells))
	}
	c := sw.Cells[1].Config
	if c.Sampler.ShieldFrac != gelo.Fixed(0.3) || c.Sampler.ShieldScale != gelo.Fixed(3) || c.Model.Hidden != 16 {
		t.Errorf("cell config %+v", c.Sampler)
	}
	// An invalid base file is reported in that file, at its line.
	if err := os.WriteFile(filepath.Join(dir, "paper", "b.yaml"), []byte("name: x\nsampler:\n  shield_frac: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p)
	if err == nil || !strings.Contains(err.Error(), "b.yaml:3:") || !strings.Contains(err.Error(), "s.yaml") {
		t.Fatalf("bad base_config: %v", err)
	}
}

// Each bad sweep gives one line naming the sweep file, the line and column, and what is wrong.
func TestStrictErrorsNameFileAndLine(t *testing.T) {
	// tinyBase spans lines 1-10; its sampler's shield_frac is on line 7.
	cases := []struct {
		name, src string
		loc       string
		want      []string
	}{
		{"unknown top key", tinyBase + "axis:\n  sampler.shield_kind: [gaussian]\n", "sw.yaml:11:1:", []string{`unknown key "axis"`, "axes", "cells"}},
		{"unknown axis path", tinyBase + "axes:\n  sampler.shield_knd: [gaussian]\n", "sw.yaml:12:3:", []string{`no key "shield_knd"`, "shield_kind"}},
		{"path into a value", tinyBase + "axes:\n  seed.x: [1]\n", "sw.yaml:12:3:", []string{"seed is a value"}},
		{"reserved axis", tinyBase + "axes:\n  name: [a, b]\n", "sw.yaml:12:3:", []string{"cannot be an axis"}},
		{"bad axis value", tinyBase + "axes:\n  sampler.shield_scale: [0.5, -1]\n", "sw.yaml:12:31:", []string{"sampler.shield_scale", "-1", "[1e-06, 1000000]"}},
		{"bad cell value", tinyBase + "cells:\n  - {sampler.obs_rows: 1.5}\n", "sw.yaml:12:24:", []string{"sampler.obs_rows", "1.5", "[1e-06, 1]"}},
		{"wrong type in cell", tinyBase + "cells:\n  - {train.steps: many}\n", "sw.yaml:12:19:", []string{"train.steps", "many"}},
		{"empty axis", tinyBase + "axes:\n  sampler.shield_scale: []\n", "sw.yaml:12:", []string{"non-empty list"}},
		{"axis and cell", tinyBase + "axes:\n  sampler.shield_scale: [1]\ncells:\n  - {sampler.shield_scale: 2}\n", "sw.yaml:14:28:", []string{"both as an axis and in a cell"}},
		{"duplicate cells", tinyBase + "cells:\n  - {sampler.shield_scale: 1}\n  - {sampler.shield_scale: 1.0}\n", "sw.yaml:", []string{"cells 1 and 2 have the same settings"}},
		{"duplicate key", tinyBase + "axes:\n  seed: [1]\naxes:\n  seed: [2]\n", "sw.yaml:13:1:", []string{"axes", "already defined"}},
		{"inline base unknown key", "base:\n  seed: 1\n  sampler:\n    shield_fraction: 0.5\naxes:\n  seed: [1]\n", "sw.yaml:4:5:", []string{`unknown field "shield_fraction"`}},
		{"inline base bad value", "name: x\nbase:\n  sampler:\n    shield_frac: 1.5\naxes:\n  seed: [1]\n", "sw.yaml:4:", []string{"sampler.shield_frac", "[0, 1]"}},
		{"no base", "axes:\n  seed: [1]\n", "sw.yaml:", []string{"no base"}},
		{"base and base_config", tinyBase + "base_config: x.yaml\naxes:\n  seed: [1]\n", "sw.yaml:11:1:", []string{"not both"}},
		{"missing base_config", "base_config: nowhere.yaml\naxes:\n  seed: [1]\n", "sw.yaml:1:14:", []string{"base_config", "nowhere.yaml"}},
		{"nothing to sweep", tinyBase, "sw.yaml:", []string{"nothing to sweep"}},
		{"not a mapping", "- a\n- b\n", "sw.yaml:1:", []string{"mapping"}},
		{"bad yaml", "base: [\n", "sw.yaml:", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("sw.yaml", []byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			if !strings.Contains(msg, c.loc) {
				t.Errorf("error %q does not locate %q", msg, c.loc)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestFieldsAndConfigDiff(t *testing.T) {
	a := config.Default()
	var scale string
	for _, f := range Fields(a) {
		if f.Path == "sampler.shield_scale" {
			scale = f.Value
		}
		if strings.HasPrefix(f.Path, "sampler.shield_scale.") {
			t.Errorf("a range is one field, got %s", f.Path)
		}
	}
	if scale != "1" {
		t.Errorf("sampler.shield_scale = %q, want 1", scale)
	}
	b := a
	b.Train.Workers, b.Train.Prefetch = 7, 9
	if d := ConfigDiff(a, b); d != "" {
		t.Errorf("workers and prefetch do not change results, got diff %q", d)
	}
	b.Sampler.ShieldScale = gelo.LogUniform(0.5, 4)
	if d := ConfigDiff(a, b); d != "sampler.shield_scale: 1 -> {min: 0.5, max: 4, rand: log_uniform}" {
		t.Errorf("diff %q", d)
	}
	had := a
	had.Model.InputDim = 32
	if d := ConfigDiff(had, a); d != "" {
		t.Errorf("widths filled in from the store are not a difference, got %q", d)
	}
}

// Every sweep shipped in configs/sweeps must parse and expand.
func TestShippedSweepsParse(t *testing.T) {
	paths, err := filepath.Glob("../configs/sweeps/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 {
		t.Fatalf("found only %v", paths)
	}
	for _, p := range paths {
		sw, err := Load(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(sw.Cells) < 9 {
			t.Errorf("%s: only %d cells", p, len(sw.Cells))
		}
		kinds := map[gelo.ShieldKind]bool{}
		for _, c := range sw.Cells {
			kinds[c.Config.Sampler.ShieldKind] = true
		}
		// The paper's unmixing table (paper-unmix) uses only gaussian and manifold shields.
		if len(kinds) < 2 {
			t.Errorf("%s: shield kinds %v, want at least two of gaussian, manifold and student_t", p, kinds)
		}
	}
}

func TestErrorIsTyped(t *testing.T) {
	_, err := Parse("sw.yaml", []byte(tinyBase+"axes:\n  nope: [1]\n"))
	var se *Error
	if !errors.As(err, &se) || se.Line != 12 || se.File != "sw.yaml" {
		t.Fatalf("got %#v", err)
	}
}

func TestCellsWithTheSameResolvedConfigRejected(t *testing.T) {
	src := "base:\n  name: x\naxes:\n  sampler.shield_scale: [[0.5, 1], {min: 0.5, max: 1}]\n"
	_, err := Parse("dup.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "resolve to the same run config") || !strings.Contains(err.Error(), "dup.yaml:4:") {
		t.Fatalf("got %v", err)
	}
}
