package sweep

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gelo-research/geloattack/config"
)

// Error is a sweep-file error located in its file: a config.Error of kind "sweep", so that run
// configs and sweep files report problems the same way.
type Error = config.Error

// Sweep is a parsed and expanded sweep file: every cell with its validated run config.
type Sweep struct {
	// Name names the sweep: the file's `name`, else the file's base name without .yaml.
	Name string
	// File is the sweep file as named to Parse.
	File string
	// Cells are the runs in expansion order: the grid of `axes` (first axis slowest), and within
	// each grid point every entry of `cells` in file order.
	Cells []Cell
}

// Setting is one overridden config field of a cell.
type Setting struct {
	// Path is the field's dotted YAML path, e.g. "sampler.shield_scale".
	Path string
	// Value is the decoded YAML value: a number, string, bool, list or yaml.MapSlice.
	Value any
	// Text is the value as the cell's name writes it.
	Text string
	// Line and Col are where the value is written in the sweep file.
	Line, Col int
}

// Cell is one run of a sweep.
type Cell struct {
	// Name is the cell's directory name under the sweep's output directory, made of its settings
	// (e.g. "shield_kind=gaussian,shield_scale=0.5"): readable, filesystem-safe, stable, unique.
	Name string
	// Settings are the fields the cell overrides in the base: grid axes first, then the entry of
	// `cells`, each in file order.
	Settings []Setting
	// Config is the cell's run config: the base with the settings applied, name set to Name and
	// out_dir cleared, validated by config.Parse.
	Config config.Run
	// Label is the cell's `label` (e.g. "R7", the paper's row), empty when its entry has none.
	// A labelled cell's Name is its label.
	Label string
	// Paper is the cell's `paper` entry, the paper's figures for this setting; nil when none.
	Paper *Reference
}

// Reference is the paper's result for a cell's setting: the final train and val mass of its
// table, each a number in [0, 1].
type Reference struct {
	// Train is the paper's train figure.
	Train float64 `json:"train"`
	// Val is the paper's val figure.
	Val float64 `json:"val"`
}

// cellKeys are the reserved keys of a `cells` entry, beside its config paths.
var cellKeys = []string{"label", "paper"}

// entry is one entry of `cells`: its settings and its reserved keys.
type entry struct {
	settings []Setting
	label    string
	paper    *Reference
	// at is where the entry's label (else its paper entry, else the entry) is written.
	line, col int
}

// topKeys are the keys a sweep file may hold, with what each is for (shown in errors).
var topKeys = []string{"name", "base", "base_config", "axes", "cells", "cells_from"}

// Load reads and expands a sweep file; see Parse.
func Load(path string) (*Sweep, error) {
	src, err := config.ReadFile("sweep", path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse decodes a sweep file named name (base_config paths are relative to its directory),
// strictly: unknown keys, duplicate keys, unknown axis paths and empty axes are errors with their
// line. The base must be a valid run config by itself, and every cell is validated by config.Parse;
// an invalid cell is reported at the axis value that made it invalid.
func Parse(name string, src []byte) (*Sweep, error) {
	// Binary bytes would be echoed in errors, and a key that is not a name breaks rendering.
	if err := config.CheckText("sweep", name, src); err != nil {
		return nil, err
	}
	if err := config.CheckKeys("sweep", name, src); err != nil {
		return nil, err
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, yamlError(name, err)
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d.Body == nil {
			continue
		}
		if body != nil {
			return nil, errAt(name, d.Body, "", "a sweep file holds one YAML document")
		}
		body = d.Body
	}
	if body == nil {
		return nil, &Error{Kind: "sweep", File: name, Msg: "empty sweep file: want base or base_config, and axes or cells"}
	}
	top, ok := body.(*ast.MappingNode)
	if !ok {
		return nil, errAt(name, body, "", "a sweep file is a mapping of "+strings.Join(topKeys, ", "))
	}
	sw := &Sweep{File: name, Name: defaultName(name)}
	var (
		baseNode, baseCfgNode *ast.MappingValueNode
		axes                  []axis
		cells                 []entry
		haveAxes, haveCells   bool
		cellsFrom             *ast.MappingValueNode
	)
	seen := map[string]bool{}
	for _, kv := range top.Values {
		key := kv.Key.String()
		if seen[key] {
			return nil, errAt(name, kv.Key, key, "duplicate key")
		}
		seen[key] = true
		switch key {
		case "name":
			var s string
			// The name is the default output directory's last element (sweeps/<name>): ".." or
			// a name with a slash would put the sweep's files elsewhere.
			if err := yaml.NodeToValue(kv.Value, &s); err != nil || !labelRe.MatchString(s) || len(s) > maxNameLen {
				return nil, errAt(name, kv.Value, key, fmt.Sprintf("want a name of at most %d letters, digits and . _ - + = starting with a letter or digit (it names the directory sweeps/<name>)", maxNameLen))
			}
			sw.Name = s
		case "base":
			baseNode = kv
		case "base_config":
			baseCfgNode = kv
		case "axes":
			haveAxes = true
			if axes, err = parseAxes(name, kv.Value); err != nil {
				return nil, err
			}
		case "cells":
			haveCells = true
			if cells, err = parseCells(name, kv.Value); err != nil {
				return nil, err
			}
		case "cells_from":
			cellsFrom = kv
		default:
			return nil, errAt(name, kv.Key, "", fmt.Sprintf("unknown key %q (want %s)", key, strings.Join(topKeys, ", ")))
		}
	}
	switch {
	case baseNode == nil && baseCfgNode == nil:
		return nil, &Error{Kind: "sweep", File: name, Msg: "no base: set base (a run config) or base_config (a path relative to the sweep file)"}
	case baseNode != nil && baseCfgNode != nil:
		return nil, errAt(name, baseCfgNode.Key, "base_config", "set base or base_config, not both")
	case cellsFrom != nil && (haveAxes || haveCells):
		return nil, errAt(name, cellsFrom.Key, "cells_from", "set cells_from or axes/cells, not both")
	case cellsFrom != nil:
		if axes, cells, err = borrowCells(name, cellsFrom); err != nil {
			return nil, err
		}
	case !haveAxes && !haveCells:
		return nil, &Error{Kind: "sweep", File: name, Msg: "nothing to sweep: set axes (a grid) and/or cells (a list of overrides), or cells_from"}
	}
	var base yaml.MapSlice
	if baseNode != nil {
		base, err = inlineBase(name, src, top, baseNode)
	} else {
		base, err = fileBase(name, baseCfgNode)
	}
	if err != nil {
		return nil, err
	}
	if sw.Cells, err = expand(name, base, axes, cells); err != nil {
		return nil, err
	}
	return sw, nil
}

// defaultName is the name of a sweep file without a name key: its base name without the
// extension, made safe as a directory name (never "", "." or "..").
func defaultName(file string) string {
	n := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if labelRe.MatchString(n) && len(n) <= maxNameLen {
		return n
	}
	if n == "" {
		return "sweep"
	}
	n, _ = sanitize(n)
	return n[:min(len(n), maxNameLen)]
}

// axis is one entry of `axes`: a config path and the values it takes.
type axis struct {
	path   string
	values []Setting
}

func parseAxes(file string, n ast.Node) ([]axis, error) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		return nil, errAt(file, n, "axes", "want a mapping of config paths (e.g. sampler.shield_scale) to lists of values")
	}
	var out []axis
	seen := map[string]bool{}
	for _, kv := range m.Values {
		path := kv.Key.String()
		if seen[path] {
			return nil, errAt(file, kv.Key, path, "duplicate axis")
		}
		seen[path] = true
		if err := checkPath(path); err != nil {
			return nil, errAt(file, kv.Key, "axes", err.Error())
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok || len(seq.Values) == 0 {
			return nil, errAt(file, kv.Value, path, "want a non-empty list of values (a range is one value: [[0.1, 1]] or [{min: 0.1, max: 1, rand: log_uniform}])")
		}
		a := axis{path: path}
		for _, vn := range seq.Values {
			s, err := setting(file, path, vn)
			if err != nil {
				return nil, err
			}
			a.values = append(a.values, s)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errAt(file, n, "axes", "no axes")
	}
	return out, nil
}

func parseCells(file string, n ast.Node) ([]entry, error) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok || len(seq.Values) == 0 {
		return nil, errAt(file, n, "cells", "want a non-empty list of mappings from config paths to values")
	}
	var out []entry
	labels := map[string]int{}
	for _, cn := range seq.Values {
		m, ok := cn.(*ast.MappingNode)
		if !ok {
			return nil, errAt(file, cn, "cells", "each cell is a mapping from config paths to values")
		}
		var e entry
		e.line, e.col = pos(cn)
		seen := map[string]bool{}
		for _, kv := range m.Values {
			path := kv.Key.String()
			if seen[path] {
				return nil, errAt(file, kv.Key, path, "duplicate key in cell")
			}
			seen[path] = true
			switch path {
			case "label":
				l, err := parseLabel(file, kv.Value)
				if err != nil {
					return nil, err
				}
				if prev, dup := labels[l]; dup {
					return nil, errAt(file, kv.Value, "label", fmt.Sprintf("label %q is already the label of cell entry %d; labels are unique", l, prev))
				}
				labels[l] = len(out) + 1
				e.label = l
				e.line, e.col = pos(kv.Value)
				continue
			case "paper":
				ref, err := parseReference(file, kv.Value)
				if err != nil {
					return nil, err
				}
				e.paper = ref
				continue
			}
			if !strings.Contains(path, ".") && !isConfigKey(path) {
				return nil, errAt(file, kv.Key, "cells", fmt.Sprintf("unknown key %q: a cell entry holds config paths (e.g. sampler.shield_scale) and the reserved keys %s", path, strings.Join(cellKeys, ", ")))
			}
			if err := checkPath(path); err != nil {
				return nil, errAt(file, kv.Key, "cells", err.Error())
			}
			s, err := setting(file, path, kv.Value)
			if err != nil {
				return nil, err
			}
			e.settings = append(e.settings, s)
		}
		if err := checkOverlap(file, e.settings); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// checkOverlap refuses a cell that sets one field twice: by a dotted key and inside a nested
// section (train.steps: 4 beside train: {steps: 5}), or by a section and a key within it. Which
// one would win is an accident of order; the cell's name would describe the other.
func checkOverlap(file string, settings []Setting) error {
	by := map[string]Setting{}
	for _, s := range settings {
		for _, leaf := range leaves(s.Path, s.Value) {
			if prev, dup := by[leaf]; dup {
				return &Error{Kind: "sweep", File: file, Line: s.Line, Col: s.Col, Key: s.Path,
					Msg: fmt.Sprintf("%s is set twice in this cell: by %s at line %d and by %s at line %d; keep one",
						leaf, prev.Path, prev.Line, s.Path, s.Line)}
			}
			by[leaf] = s
		}
	}
	return nil
}

// isSection reports whether path names a section of the run config (a mapping of keys) rather
// than a value; a range ({min, max, rand}) is a value.
func isSection(path string) bool {
	for _, f := range config.Fields(config.Default()) {
		if strings.HasPrefix(f.Path, path+".") {
			return true
		}
	}
	return false
}

// leaves are the dotted paths of the fields that setting path to v sets: a mapping given for a
// section sets each of its keys (recursively), anything else sets path itself.
func leaves(path string, v any) []string {
	m, ok := v.(yaml.MapSlice)
	if !ok || !isSection(path) {
		return []string{path}
	}
	var out []string
	for _, it := range m {
		out = append(out, leaves(path+"."+fmt.Sprint(it.Key), it.Value)...)
	}
	return out
}

// isConfigKey reports whether key is a top-level key of the run config.
func isConfigKey(key string) bool {
	_, ok := fieldByTag(reflect.TypeOf(config.Run{}), key)
	return ok
}

// labelRe is what a label may be: it names the cell's directory, so only letters, digits and
// . _ - + = after a letter or digit.
var labelRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+=-]*$`)

func parseLabel(file string, n ast.Node) (string, error) {
	var l string
	if err := yaml.NodeToValue(n, &l); err != nil || !labelRe.MatchString(l) || len(l) > maxNameLen {
		return "", errAt(file, n, "label", fmt.Sprintf("want a label of at most %d letters, digits and . _ - + = starting with a letter or digit (it names the cell's directory), e.g. R7", maxNameLen))
	}
	return l, nil
}

// parseReference reads `paper: {train: x, val: y}`, both numbers in [0, 1].
func parseReference(file string, n ast.Node) (*Reference, error) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		return nil, errAt(file, n, "paper", "want the paper's figures as {train: x, val: y}, numbers in [0, 1]")
	}
	ref := &Reference{}
	seen := map[string]bool{}
	for _, kv := range m.Values {
		key := kv.Key.String()
		if seen[key] {
			return nil, errAt(file, kv.Key, "paper."+key, "duplicate key")
		}
		seen[key] = true
		var dst *float64
		switch key {
		case "train":
			dst = &ref.Train
		case "val":
			dst = &ref.Val
		default:
			return nil, errAt(file, kv.Key, "paper", fmt.Sprintf("unknown key %q (want train, val)", key))
		}
		var v any
		if err := yaml.NodeToValue(kv.Value, &v); err != nil {
			return nil, errAt(file, kv.Value, "paper."+key, err.Error())
		}
		f, isNum := number(v)
		if !isNum || math.IsNaN(f) || f < 0 || f > 1 {
			return nil, errAt(file, kv.Value, "paper."+key, fmt.Sprintf("%s, want a number in [0, 1]", valueText(v)))
		}
		*dst = f
	}
	for _, k := range []string{"train", "val"} {
		if !seen[k] {
			return nil, errAt(file, n, "paper", fmt.Sprintf("missing %s (want {train: x, val: y})", k))
		}
	}
	return ref, nil
}

// setting decodes one value node of path.
func setting(file, path string, n ast.Node) (Setting, error) {
	var v any
	if err := yaml.NodeToValue(n, &v, yaml.UseOrderedMap()); err != nil {
		return Setting{}, errAt(file, n, path, err.Error())
	}
	line, col := pos(n)
	return Setting{Path: path, Value: v, Text: valueText(v), Line: line, Col: col}, nil
}

// borrowCells reads the axes and cells (labels and paper figures included) of the sweep file that
// cells_from names, relative to this one, so that one grid can run on another base (the paper's
// rows on a CPU-size model, say) without copying its cells. Errors in them point into that file.
func borrowCells(file string, kv *ast.MappingValueNode) ([]axis, []entry, error) {
	var rel string
	if err := yaml.NodeToValue(kv.Value, &rel); err != nil || rel == "" {
		return nil, nil, errAt(file, kv.Value, "cells_from", "want the path of a sweep file, relative to this one")
	}
	p := rel
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(file), rel)
	}
	src, err := config.ReadFile("sweep", p)
	if err != nil {
		return nil, nil, errAt(file, kv.Value, "cells_from", err.Error())
	}
	if err := config.CheckText("sweep", p, src); err != nil {
		return nil, nil, err
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, nil, yamlError(p, err)
	}
	var top *ast.MappingNode
	for _, d := range f.Docs {
		if m, ok := d.Body.(*ast.MappingNode); ok && top == nil {
			top = m
		}
	}
	if top == nil {
		return nil, nil, errAt(file, kv.Value, "cells_from", fmt.Sprintf("%s is not a sweep file (a mapping)", p))
	}
	var (
		axes  []axis
		cells []entry
		found bool
	)
	for _, c := range top.Values {
		switch c.Key.String() {
		case "axes":
			found = true
			if axes, err = parseAxes(p, c.Value); err != nil {
				return nil, nil, err
			}
		case "cells":
			found = true
			if cells, err = parseCells(p, c.Value); err != nil {
				return nil, nil, err
			}
		case "cells_from":
			return nil, nil, errAt(p, c.Key, "cells_from", fmt.Sprintf("%s borrows its cells too: cells_from must name a sweep with axes or cells of its own", p))
		}
	}
	if !found {
		return nil, nil, errAt(file, kv.Value, "cells_from", fmt.Sprintf("%s has no axes or cells", p))
	}
	return axes, cells, nil
}

// fileBase reads base_config, relative to the sweep file, validated on its own.
func fileBase(file string, kv *ast.MappingValueNode) (yaml.MapSlice, error) {
	var rel string
	if err := yaml.NodeToValue(kv.Value, &rel); err != nil || rel == "" {
		return nil, errAt(file, kv.Value, "base_config", "want the path of a run config, relative to the sweep file")
	}
	p := rel
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(file), rel)
	}
	src, err := config.ReadFile("config", p)
	if err != nil {
		return nil, errAt(file, kv.Value, "base_config", err.Error())
	}
	if err := config.CheckNotEmpty(p, src); err != nil {
		return nil, fmt.Errorf("sweep %s: base_config: %w", file, err)
	}
	if _, err := config.Parse(p, src); err != nil {
		return nil, fmt.Errorf("sweep %s: base_config: %w", file, err)
	}
	var base yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(src, &base, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("sweep %s: base_config %s: %w", file, p, err)
	}
	return base, nil
}

// inlineBase decodes `base`, validated on its own. A block mapping is cut out of the sweep file
// with its line numbers kept (blank lines above, indentation removed), so config.Parse's errors
// point at the right line of the sweep file; their column is shifted back by the indentation.
func inlineBase(file string, src []byte, top *ast.MappingNode, kv *ast.MappingValueNode) (yaml.MapSlice, error) {
	var base yaml.MapSlice
	if _, null := kv.Value.(*ast.NullNode); !null {
		m, ok := kv.Value.(*ast.MappingNode)
		if !ok {
			return nil, errAt(file, kv.Value, "base", "want a run config (a mapping)")
		}
		if err := yaml.NodeToValue(m, &base, yaml.UseOrderedMap()); err != nil {
			return nil, errAt(file, m, "base", err.Error())
		}
	}
	doc, indent, ok := baseLines(src, top, kv)
	if !ok {
		// A flow mapping on one line: validate its re-encoding, without line numbers.
		doc, _ = yaml.Marshal(base)
		if len(base) == 0 {
			doc = nil
		}
	}
	if _, err := config.Parse(file, doc); err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			if !ok {
				ce.Line, ce.Col = 0, 0
			} else if ce.Line > 0 {
				ce.Col += indent
			}
		}
		return nil, fmt.Errorf("sweep %s: base: %w", file, err)
	}
	return base, nil
}

// baseLines is the text of a block-style `base` with the sweep file's line numbering.
func baseLines(src []byte, top *ast.MappingNode, kv *ast.MappingValueNode) ([]byte, int, bool) {
	m, ok := kv.Value.(*ast.MappingNode)
	if !ok || m.IsFlowStyle || len(m.Values) == 0 {
		return nil, 0, false
	}
	keyLine := kv.Key.GetToken().Position.Line
	indent := m.Values[0].Key.GetToken().Position.Column - 1
	end := -1 // last line of the block (1-based), -1 = end of file
	for i, v := range top.Values {
		if v == kv && i+1 < len(top.Values) {
			end = top.Values[i+1].Key.GetToken().Position.Line - 1
		}
	}
	lines := strings.Split(string(src), "\n")
	if end < 0 || end > len(lines) {
		end = len(lines)
	}
	var b strings.Builder
	b.WriteString(strings.Repeat("\n", keyLine))
	for _, l := range lines[keyLine:end] {
		n := 0
		for n < indent && n < len(l) && l[n] == ' ' {
			n++
		}
		b.WriteString(l[n:])
		b.WriteByte('\n')
	}
	return []byte(b.String()), indent, true
}

func pos(n ast.Node) (int, int) {
	if n == nil || n.GetToken() == nil {
		return 0, 0
	}
	p := n.GetToken().Position
	return p.Line, p.Column
}

func errAt(file string, n ast.Node, key, msg string) error {
	l, c := pos(n)
	return &Error{Kind: "sweep", File: file, Line: l, Col: c, Key: key, Msg: msg}
}

var yamlPos = regexp.MustCompile(`^\[(\d+):(\d+)\] (.*)$`)

// yamlError turns go-yaml's "[line:col] message" into an Error.
func yamlError(file string, err error) error {
	msg := strings.TrimSpace(yaml.FormatError(err, false, false))
	msg, _, _ = strings.Cut(msg, "\n")
	if m := yamlPos.FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		return &Error{Kind: "sweep", File: file, Line: l, Col: c, Msg: m[3]}
	}
	return &Error{Kind: "sweep", File: file, Msg: msg}
}
