package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/gelo-research/geloattack/config"
)

// maxNameLen keeps a cell's directory name well under the 255-byte limit of common filesystems,
// with room for the files inside it in error messages.
const maxNameLen = 120

// MaxCells bounds the cells of one sweep: far more than a sweep trains, few enough to expand and
// validate in seconds.
const MaxCells = 100000

// expand builds the cells: every grid point of axes (first axis slowest) combined with every entry
// of cells (none: the grid alone), each named and validated.
func expand(file string, base yaml.MapSlice, axes []axis, entries []entry) ([]Cell, error) {
	cells := make([][]Setting, len(entries))
	for i, e := range entries {
		cells[i] = e.settings
	}
	// Count before building: a grid is a product, and a few long axes make more cells than memory
	// holds (or than anyone means to train).
	count := max(len(cells), 1)
	for _, a := range axes {
		if len(a.values) > 0 && count > MaxCells/len(a.values) {
			return nil, &Error{Kind: "sweep", File: file, Key: "axes",
				Msg: fmt.Sprintf("the grid has more than %d cells (axis %s multiplies it by %d); split the sweep", MaxCells, a.path, len(a.values))}
		}
		count *= len(a.values)
	}
	grid := [][]Setting{nil}
	for _, a := range axes {
		var next [][]Setting
		for _, g := range grid {
			for _, v := range a.values {
				next = append(next, append(append([]Setting(nil), g...), v))
			}
		}
		grid = next
	}
	if len(cells) == 0 {
		cells = [][]Setting{nil}
	}
	axisAt := map[string]bool{}
	for _, a := range axes {
		axisAt[a.path] = true
	}
	for _, c := range cells {
		for _, s := range c {
			if axisAt[s.Path] {
				return nil, &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col, Key: s.Path,
					Msg: "set both as an axis and in a cell; a path is either an axis of the grid or set by cells"}
			}
		}
	}
	// A label and the paper's figures belong to one setting: an entry that carries them must not
	// be multiplied by a grid.
	if len(grid) > 1 {
		for _, e := range entries {
			if e.label != "" || e.paper != nil {
				return nil, &Error{Kind: "sweep", File: file, Line: e.line, Col: e.col, Key: "cells",
					Msg: fmt.Sprintf("a cell entry with label or paper names one setting, but axes combine it with %d grid points; set the axes' values in each entry instead", len(grid))}
			}
		}
	}
	var out []Cell
	var at []entry // the entry of each cell
	for _, g := range grid {
		for i, c := range cells {
			out = append(out, Cell{Settings: append(append([]Setting(nil), g...), c...)})
			if len(entries) > 0 {
				at = append(at, entries[i])
			} else {
				at = append(at, entry{})
			}
		}
	}
	if err := nameCells(file, out); err != nil {
		return nil, err
	}
	// A labelled cell is named by its label (checked filesystem-safe and unique when parsed); it
	// must not take the name another cell has from its settings.
	labelled := map[string]bool{}
	for i, e := range at {
		if e.label != "" {
			out[i].Name, out[i].Label = e.label, e.label
			labelled[e.label] = true
		}
		out[i].Paper = e.paper
	}
	for i, c := range out {
		if c.Label == "" && labelled[c.Name] {
			e := at[i]
			for _, x := range entries {
				if x.label == c.Name {
					e = x
				}
			}
			return nil, &Error{Kind: "sweep", File: file, Line: e.line, Col: e.col, Key: "label",
				Msg: fmt.Sprintf("label %q is also the name of cell %d (%s); choose another label", c.Name, i+1, describe(c.Settings))}
		}
	}
	for i := range out {
		cfg, err := render(file, base, &out[i])
		if err != nil {
			return nil, err
		}
		out[i].Config = cfg
	}
	// Different spellings of one value ([0.5, 1] and {min: 0.5, max: 1}) pass the settings check
	// above; two cells that would train the same thing are refused on their resolved configs.
	for i := range out {
		for j := 0; j < i; j++ {
			a, b := out[j].Config, out[i].Config
			a.Name, a.OutDir = b.Name, b.OutDir
			if config.Diff(a, b) == "" {
				s := firstSetting(out[i].Settings)
				return nil, &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col,
					Msg: fmt.Sprintf("cells %s and %s resolve to the same run config", out[j].Name, out[i].Name)}
			}
		}
	}
	return out, nil
}

// nameCells gives every cell its directory name: "label=value" for each setting, joined by commas,
// where label is the path's last key unless two different paths share it. A name that had to be
// sanitised or shortened, or that two different cells would share, gets a hash of the settings.
func nameCells(file string, cells []Cell) error {
	byLabel := map[string]map[string]bool{}
	for _, c := range cells {
		for _, s := range c.Settings {
			l := lastKey(s.Path)
			if byLabel[l] == nil {
				byLabel[l] = map[string]bool{}
			}
			byLabel[l][s.Path] = true
		}
	}
	label := func(p string) string {
		if len(byLabel[lastKey(p)]) > 1 {
			return p
		}
		return lastKey(p)
	}
	keys := make([]string, len(cells))
	byKey := map[string]int{}
	for i := range cells {
		c := &cells[i]
		keys[i] = canonicalKey(c.Settings)
		if j, dup := byKey[keys[i]]; dup {
			s := firstSetting(c.Settings)
			return &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col,
				Msg: fmt.Sprintf("cells %d and %d have the same settings (%s)", j+1, i+1, describe(c.Settings))}
		}
		byKey[keys[i]] = i
		parts := make([]string, len(c.Settings))
		for k, s := range c.Settings {
			parts[k] = label(s.Path) + "=" + s.Text
		}
		n := strings.Join(parts, ",")
		if n == "" {
			n = "base"
		}
		safe, changed := sanitize(n)
		if changed || len(safe) > maxNameLen {
			safe = withHash(safe, keys[i])
		}
		c.Name = safe
	}
	// Different settings can print alike (the number 1 and the string "1"): hash them apart.
	count := map[string]int{}
	for _, c := range cells {
		count[c.Name]++
	}
	for i := range cells {
		if count[cells[i].Name] > 1 {
			cells[i].Name = withHash(cells[i].Name, keys[i])
		}
	}
	return nil
}

func firstSetting(s []Setting) Setting {
	if len(s) == 0 {
		return Setting{}
	}
	return s[0]
}

func describe(s []Setting) string {
	if len(s) == 0 {
		return "the base alone"
	}
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = x.Path + "=" + x.Text
	}
	return strings.Join(parts, ", ")
}

func lastKey(p string) string { return p[strings.LastIndexByte(p, '.')+1:] }

// sanitize keeps letters, digits and . _ - + = , (safe in file names and shells alike) and turns
// anything else into '_'.
func sanitize(s string) (string, bool) {
	b := []byte(s)
	changed := false
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-+=,", c) >= 0
		if !ok {
			b[i] = '_'
			changed = true
		}
	}
	if b[0] == '.' || b[0] == '-' {
		b[0] = '_'
		changed = true
	}
	return string(b), changed
}

// withHash shortens n if needed and appends 8 hex digits of the hash of key.
func withHash(n, key string) string {
	h := sha256.Sum256([]byte(key))
	if len(n) > maxNameLen-9 {
		n = n[:maxNameLen-9]
	}
	return n + "-" + hex.EncodeToString(h[:4])
}

// canonicalKey identifies a cell's settings independently of their order and of how numbers are
// written (1 and 1.0 are the same setting).
func canonicalKey(s []Setting) string {
	m := map[string]any{}
	for _, x := range s {
		m[x.Path] = Canonical(x.Value)
	}
	b, _ := json.Marshal(m) // maps, slices, strings, floats and bools always marshal
	return string(b)
}

// Canonical turns a decoded YAML value into plain JSON-able values: every number a float64,
// every mapping a map[string]any.
func Canonical(v any) any {
	switch v := v.(type) {
	case yaml.MapSlice:
		m := make(map[string]any, len(v))
		for _, it := range v {
			m[fmt.Sprint(it.Key)] = Canonical(it.Value)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = Canonical(x)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Canonical(x)
		}
		return out
	}
	if f, ok := number(v); ok {
		return f
	}
	return v
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	case float32:
		return float64(v), true
	}
	return 0, false
}

// valueText writes a value for a cell name: numbers shortest, ranges as min-max_rand
// ({min: 0.5, max: 10, rand: log_uniform} is 0.5-10_log_uniform, [2, 8] is 2-8_uniform).
func valueText(v any) string {
	if f, ok := number(v); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case []any:
		if len(v) == 2 {
			lo, ok1 := number(v[0])
			hi, ok2 := number(v[1])
			if ok1 && ok2 {
				return rangeText(lo, hi, "uniform")
			}
		}
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = valueText(x)
		}
		return "[" + strings.Join(parts, "+") + "]"
	case yaml.MapSlice:
		if lo, hi, rand, ok := rangeMap(v); ok {
			return rangeText(lo, hi, rand)
		}
		parts := make([]string, len(v))
		for i, it := range v {
			parts[i] = fmt.Sprint(it.Key) + ":" + valueText(it.Value)
		}
		return "{" + strings.Join(parts, "+") + "}"
	}
	return fmt.Sprint(v)
}

func rangeText(lo, hi float64, rand string) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return f(lo) + "-" + f(hi) + "_" + rand
}

// rangeMap reads {min, max[, rand]}, the mapping form of a gelo.Range.
func rangeMap(m yaml.MapSlice) (lo, hi float64, rand string, ok bool) {
	rand = "uniform"
	var haveLo, haveHi bool
	for _, it := range m {
		switch fmt.Sprint(it.Key) {
		case "min":
			lo, haveLo = number(it.Value)
		case "max":
			hi, haveHi = number(it.Value)
		case "rand":
			s, isStr := it.Value.(string)
			if !isStr {
				return 0, 0, "", false
			}
			rand = s
		default:
			return 0, 0, "", false
		}
	}
	return lo, hi, rand, haveLo && haveHi
}

// render applies a cell's settings to the base and validates the result with config.Parse. An
// error about a field the cell sets is reported at that setting's value in the sweep file.
func render(file string, base yaml.MapSlice, c *Cell) (config.Run, error) {
	doc := setPath(deletePath(base, "out_dir"), []string{"name"}, c.Name)
	for _, s := range c.Settings {
		var err error
		if doc, err = setPathChecked(doc, s.Path, s.Value); err != nil {
			return config.Run{}, &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col, Key: s.Path, Msg: err.Error()}
		}
	}
	src, err := yaml.Marshal(doc)
	if err != nil {
		return config.Run{}, fmt.Errorf("sweep %s: cell %s: encoding its config: %w", file, c.Name, err)
	}
	cfg, err := config.Parse(file+" cell "+c.Name, src)
	if err == nil {
		return cfg, nil
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, s := range c.Settings {
			if related(ce.Key, s.Path) {
				return config.Run{}, &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col, Key: s.Path,
					Msg: fmt.Sprintf("value %s in cell %s: %s", s.Text, c.Name, ce.Msg)}
			}
		}
		ce.Line, ce.Col = 0, 0 // lines of the generated document mean nothing to the user
	}
	return config.Run{}, fmt.Errorf("sweep %s: cell %s (%s): %w", file, c.Name, describe(c.Settings), err)
}

// related reports whether a config error about key concerns the setting at path: the same field,
// one inside it or its section, or (for decode errors, which name only the last key) its last key.
func related(key, path string) bool {
	if key == "" {
		return false
	}
	return key == path || strings.HasPrefix(key, path+".") || strings.HasPrefix(path, key+".") ||
		(!strings.Contains(key, ".") && key == lastKey(path))
}

// setPathChecked sets path to v in doc. A mapping given for a section is merged into the base's
// section key by key, so {train: {steps: 4}} changes train.steps and keeps every other train
// field of the base.
func setPathChecked(doc yaml.MapSlice, path string, v any) (out yaml.MapSlice, err error) {
	if m, ok := v.(yaml.MapSlice); ok && isSection(path) {
		for _, it := range m {
			if doc, err = setPathChecked(doc, path+"."+fmt.Sprint(it.Key), it.Value); err != nil {
				return nil, err
			}
		}
		return doc, nil
	}
	return setPathLeaf(doc, path, v)
}

func setPathLeaf(doc yaml.MapSlice, path string, v any) (out yaml.MapSlice, err error) {
	parts := strings.Split(path, ".")
	// Every section on the way must be a mapping (or absent) in the base.
	cur := doc
	for i, p := range parts[:len(parts)-1] {
		x, ok := lookup(cur, p)
		if !ok || x == nil {
			break
		}
		m, isMap := x.(yaml.MapSlice)
		if !isMap {
			return nil, fmt.Errorf("the base sets %s to %s, not a section", strings.Join(parts[:i+1], "."), valueText(x))
		}
		cur = m
	}
	return setPath(doc, parts, v), nil
}

func lookup(m yaml.MapSlice, key string) (any, bool) {
	for _, it := range m {
		if fmt.Sprint(it.Key) == key {
			return it.Value, true
		}
	}
	return nil, false
}

// setPath returns a copy of m with the value at path set, creating sections as needed; m is not
// modified, so every cell starts from the same base.
func setPath(m yaml.MapSlice, path []string, v any) yaml.MapSlice {
	out := append(yaml.MapSlice(nil), m...)
	for i, it := range out {
		if fmt.Sprint(it.Key) != path[0] {
			continue
		}
		if len(path) == 1 {
			out[i].Value = v
		} else {
			sub, _ := it.Value.(yaml.MapSlice)
			out[i].Value = setPath(sub, path[1:], v)
		}
		return out
	}
	if len(path) == 1 {
		return append(out, yaml.MapItem{Key: path[0], Value: v})
	}
	return append(out, yaml.MapItem{Key: path[0], Value: setPath(nil, path[1:], v)})
}

// deletePath returns a copy of m without the top-level key.
func deletePath(m yaml.MapSlice, key string) yaml.MapSlice {
	var out yaml.MapSlice
	for _, it := range m {
		if fmt.Sprint(it.Key) != key {
			out = append(out, it)
		}
	}
	return out
}
