package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the sweep-file parser, as a file inside a copy of configs/
// (so that the shipped sweeps' base_config paths resolve). It must never panic; every error must
// name the sweep file and carry no raw control byte; and a sweep it accepts must hold at least one
// cell, every cell with a unique directory name that is safe on any filesystem and a run config
// that validates and is named after the cell.
//
//	go test ./sweep -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	root := f.TempDir()
	if err := os.CopyFS(filepath.Join(root, "configs"), os.DirFS("../configs")); err != nil {
		f.Fatal(err)
	}
	name := filepath.Join(root, "configs", "sweeps", "fuzz-sweep.yaml")
	files, err := filepath.Glob("../configs/sweeps/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		tinyBase + "axes:\n  sampler.shield_scale: [0.5, 2]\n",
		tinyBase + "axes:\n  sampler.shield_kind: [gaussian, manifold]\ncells:\n  - {sampler.shield_frac: 0.1}\n  - sampler.shield_scale: {min: 0.25, max: 4, rand: log_uniform}\n",
		tinyBase + "axes: {}\n",
		tinyBase + "axes:\n  sampler.nope: [1]\n",
		tinyBase + "axes:\n  seed: [1, 1]\n",
		tinyBase + "axes:\n  name: [a/b, ..]\n",
		tinyBase + "cells: {a: 1}\n",
		"base_config: ../paper/retrieval.yaml\naxes:\n  sampler.shield_scale: [0.25, 4]\n",
		"base_config: no-such.yaml\naxes:\n  seed: [1]\n",
		"base: {name: x}\naxes:\n  seed: [1, 2]\n",
		"name: a/b\nbase: {}\naxes:\n  seed: [1]\n",
		"base: &b {seed: 1}\naxes:\n  seed: [*b]\n",
		"\x00\x1b[2J\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, dev := range []string{"/dev/", "/proc/", "/sys/"} {
			if strings.Contains(string(src), dev) {
				t.Skip("base_config could name a device that never ends") // see the hostile suite
			}
		}
		sw, err := Parse(name, src)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, name) {
				t.Fatalf("error does not name the sweep file: %v", msg)
			}
			if i := strings.IndexFunc(msg, func(c rune) bool { return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f }); i >= 0 {
				t.Fatalf("error holds the raw control byte %#02x: %q", msg[i], msg)
			}
			return
		}
		if len(sw.Cells) == 0 {
			t.Fatalf("accepted a sweep of no cells:\n%q", src)
		}
		seen := map[string]bool{}
		for i, c := range sw.Cells {
			switch {
			case c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsAny(c.Name, "/\\\x00"):
				t.Fatalf("cell %d: directory name %q is not safe", i, c.Name)
			case len(c.Name) > 255:
				t.Fatalf("cell %d: directory name of %d bytes", i, len(c.Name))
			case seen[c.Name]:
				t.Fatalf("two cells named %q", c.Name)
			case c.Config.Name != c.Name:
				t.Fatalf("cell %q: run config named %q", c.Name, c.Config.Name)
			}
			seen[c.Name] = true
			if err := c.Config.Validate(); err != nil {
				t.Fatalf("cell %q: accepted an invalid run config: %v\ninput:\n%q", c.Name, err, src)
			}
		}
	})
}
