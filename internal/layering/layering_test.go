package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goList runs `go list` over the module with a template, one line per package.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, errb.String())
	}
	var lines []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// rel strips the module path; ok false for a package outside the module.
func rel(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, Module+"/")
	return r, ok
}

// Every package of the module (tests' imports included) imports only packages on its floor or
// below, except the listed exceptions, and every package has a floor.
func TestImportsRunDownTheFloors(t *testing.T) {
	lines := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", Module+"/...")
	if len(lines) < 20 {
		t.Fatalf("go list found %d packages: not the module", len(lines))
	}
	used := map[[2]string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		from, _ := rel(f[0])
		ff, ok := Floor(from)
		if !ok {
			t.Errorf("package %s has no floor in layering's table", from)
			continue
		}
		for _, imp := range f[1:] {
			to, in := rel(imp)
			if !in || to == from {
				continue
			}
			tf, ok := Floor(to)
			if !ok {
				t.Errorf("package %s (imported by %s) has no floor", to, from)
				continue
			}
			if tf <= ff {
				continue
			}
			key := [2]string{from, to}
			if _, ok := Exceptions[key]; ok {
				used[key] = true
				continue
			}
			t.Errorf("%s (floor %d) imports %s (floor %d): imports run down the floors (docs/ARCHITECTURE.md)", from, ff, to, tf)
		}
	}
	for key := range Exceptions {
		if !used[key] {
			t.Errorf("exception %s -> %s is no longer needed: remove it", key[0], key[1])
		}
	}
}

// The packages of Forbidden link none of the listed packages, directly or not.
func TestForbiddenLinks(t *testing.T) {
	for pkg, banned := range Forbidden {
		deps := goList(t, "-deps", Module+"/"+pkg)
		for _, d := range deps {
			r, ok := rel(d)
			if ok && slices.Contains(banned, r) {
				t.Errorf("%s links %s", pkg, r)
			}
		}
	}
}

// Floor's longest prefix wins, and a prefix matches whole path elements only.
func TestFloorLongestPrefix(t *testing.T) {
	for _, c := range []struct {
		rel   string
		floor int
		ok    bool
	}{{"engine/blas", 0, true}, {"engine/cpu", 1, true}, {"train/trainopts", 2, true}, {"train", 5, true},
		{"eval", 3, true}, {"eval/assign", 0, true}, {"evalx", 0, false}, {"cmd/geloattack", 8, true}} {
		f, ok := Floor(c.rel)
		if f != c.floor || ok != c.ok {
			t.Errorf("Floor(%q) = %d, %v; want %d, %v", c.rel, f, ok, c.floor, c.ok)
		}
	}
}
