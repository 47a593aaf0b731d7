// Package report merges the cells of a sweep (their report.json and config.yaml) into the layout of
// the paper's tables (shield kind, fraction range, scale range, randomization, train mass, val
// mass, chance), as Markdown and CSV, and plots val mass against shield scale. Everything it
// writes depends only on the cells' files, sorted, so a sweep run by one process or by shards
// gives the same bytes.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/sweep"
)

// Output files, written in the sweep directory.
const (
	// MarkdownFile is the tables in Markdown.
	MarkdownFile = "report.md"
	// CSVFile is one line per cell, finished or not.
	CSVFile = "report.csv"
)

// Row is one finished cell.
type Row struct {
	// Cell is the cell's directory name.
	Cell string
	// Task is the model's task (retrieval, unmix).
	Task string
	// Kind is the shield kind.
	Kind string
	// Frac is the shield fraction (or ShieldRows > 0, a fixed shield count).
	Frac gelo.Range
	// ShieldRows is the fixed shield count k, 0 when Frac applies.
	ShieldRows int
	// Scale is the shield scale.
	Scale gelo.Range
	// Extra holds the cell's values of Report.ExtraCols.
	Extra []string
	// Steps is the number of optimizer steps the cell trained.
	Steps int64
	// Final is the last evaluation: split ("train", "val") -> metric -> value.
	Final map[string]map[string]float64
	// Label is the cell's label in the sweep file (e.g. "R7"), empty when it has none.
	Label string
	// Paper is the paper's figures for the cell's setting (from the sweep file), nil when none.
	Paper *sweep.Reference
	// order is the cell's place in the sweep's plan.
	order int
	// cfg is the cell's config.yaml.
	cfg config.Run
}

// Unfinished is a cell of the sweep without a report.
type Unfinished struct {
	// Cell is the cell's directory name.
	Cell string
	// State says how far it got (sweep.Status.Describe).
	State string
}

// Report is a sweep directory's cells, merged.
type Report struct {
	// Sweep is the sweep's name.
	Sweep string
	// Cells is the number of cells in the sweep (finished or not).
	Cells int
	// ExtraCols are the config fields (dotted paths), besides the shield kind, fraction and scale
	// and the task, whose value differs between finished cells; each gets a column.
	ExtraCols []string
	// Rows are the finished cells, sorted by task, kind, randomization, fraction, scale, the extra
	// columns and the cell's name.
	Rows []Row
	// Unfinished are the cells without a report, in the sweep's order.
	Unfinished []Unfinished
	// dir is the directory collected; plan its cells (from its plan file when hasPlan, else
	// the cell directories found, by name).
	dir     string
	plan    sweep.Plan
	hasPlan bool
}

// shown are the fields every table shows in its own columns, so they are never extra columns.
var shown = map[string]bool{
	"name": true, "out_dir": true, "model.task": true,
	"sampler.shield_kind": true, "sampler.shield_frac": true, "sampler.shield_rows": true, "sampler.shield_scale": true,
}

// Collect reads the sweep in dir. The cells are those of its plan (sweep.json); without one, every
// subdirectory that holds a config.yaml is a cell. A cell whose files cannot be read is listed as
// unfinished with the reason, never dropped. A cell directory that is a symbolic link is refused
// (the whole report: it was planted, and its results are not the sweep's).
func Collect(dir string) (*Report, error) {
	plan, hasPlan, err := cellNames(dir)
	if err != nil {
		return nil, err
	}
	r := &Report{Sweep: plan.Sweep, Cells: len(plan.Cells), dir: dir, plan: plan, hasPlan: hasPlan}
	var fields [][]sweep.Field
	for i, pc := range plan.Cells {
		n := pc.Name
		cdir := filepath.Join(dir, n)
		if err := sweep.CheckCellDir(cdir); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		st, err := sweep.Inspect(cdir)
		if err != nil {
			r.Unfinished = append(r.Unfinished, Unfinished{Cell: n, State: "unreadable: " + err.Error()})
			continue
		}
		if !st.Finished {
			r.Unfinished = append(r.Unfinished, Unfinished{Cell: n, State: st.Describe()})
			continue
		}
		row, cfg, err := readCell(cdir)
		if err != nil {
			r.Unfinished = append(r.Unfinished, Unfinished{Cell: n, State: "unreadable: " + err.Error()})
			continue
		}
		row.Cell, row.Label, row.Paper, row.order, row.cfg = n, pc.Label, pc.Paper, i, cfg
		r.Rows = append(r.Rows, row)
		fields = append(fields, sweep.Fields(cfg))
	}
	r.ExtraCols = varying(fields)
	for i := range r.Rows {
		byPath := map[string]string{}
		for _, f := range fields[i] {
			byPath[f.Path] = f.Value
		}
		for _, p := range r.ExtraCols {
			r.Rows[i].Extra = append(r.Rows[i].Extra, byPath[p])
		}
	}
	if r.HasLabels() {
		// The paper's tables are in the order of their rows (R1, R2, ...): so are the sweep file's
		// labelled cells.
		sort.SliceStable(r.Rows, func(i, j int) bool {
			a, b := r.Rows[i], r.Rows[j]
			if a.Task != b.Task {
				return a.Task < b.Task
			}
			return a.order < b.order
		})
	} else {
		sort.SliceStable(r.Rows, func(i, j int) bool { return less(r.Rows[i], r.Rows[j]) })
	}
	return r, nil
}

// HasLabels reports whether any finished cell carries a label or the paper's figures: then the
// tables gain the columns label, paper train and paper val, and rows follow the sweep's order.
func (r *Report) HasLabels() bool {
	for _, row := range r.Rows {
		if row.Label != "" || row.Paper != nil {
			return true
		}
	}
	return false
}

// cellNames is the plan of the sweep in dir and whether it has one: without a plan file, every
// cell directory (a subdirectory holding a config.yaml), by name, and the directory's name. A link
// there to a directory holding a config.yaml is refused, as a cell directory that is a link.
func cellNames(dir string) (sweep.Plan, bool, error) {
	plan, err := sweep.ReadPlan(dir)
	if err == nil {
		return plan, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return sweep.Plan{}, false, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return sweep.Plan{}, false, fmt.Errorf("report: %w", err)
	}
	var names []string
	for _, e := range entries {
		cfg := filepath.Join(dir, e.Name(), sweep.ConfigFile)
		if e.Type()&fs.ModeSymlink != 0 {
			if _, err := os.Stat(cfg); err == nil {
				return sweep.Plan{}, false, fmt.Errorf("report: %w", sweep.CheckCellDir(filepath.Join(dir, e.Name())))
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(cfg); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return sweep.Plan{}, false, fmt.Errorf("report: %s holds no %s and no cell directories (with %s)", dir, sweep.PlanFile, sweep.ConfigFile)
	}
	abs, _ := filepath.Abs(dir)
	plan = sweep.Plan{Sweep: filepath.Base(abs), Cells: make([]sweep.PlanCell, len(names))}
	for i, n := range names {
		plan.Cells[i] = sweep.PlanCell{Name: n, Settings: []sweep.PlanSetting{}}
	}
	return plan, false, nil
}

// readCell reads a finished cell's config and report.
func readCell(dir string) (Row, config.Run, error) {
	cpath := filepath.Join(dir, sweep.ConfigFile)
	src, err := safefile.Read(cpath, safefile.RunRecord) // a FIFO or /dev/zero is refused, not read forever
	if err != nil {
		return Row{}, config.Run{}, err
	}
	cfg, err := config.Parse(cpath, src)
	if err != nil {
		return Row{}, config.Run{}, err
	}
	rpath := filepath.Join(dir, sweep.ReportFile)
	b, err := safefile.Read(rpath, safefile.RunRecord)
	if err != nil {
		return Row{}, config.Run{}, err
	}
	var rep struct {
		Steps int64                         `json:"steps"`
		Final map[string]map[string]float64 `json:"final"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Row{}, config.Run{}, fmt.Errorf("%s: %w", rpath, err)
	}
	s := cfg.Sampler
	return Row{
		Task: string(cfg.Model.Task), Kind: string(s.ShieldKind), Frac: s.ShieldFrac, ShieldRows: s.ShieldRows,
		Scale: s.ShieldScale, Steps: rep.Steps, Final: rep.Final,
	}, cfg, nil
}

// varying lists the paths, other than those shown anyway, whose values differ between cells.
func varying(cells [][]sweep.Field) []string {
	if len(cells) < 2 {
		return nil
	}
	var out []string
	for k, f := range cells[0] {
		if shown[f.Path] {
			continue
		}
		for _, c := range cells[1:] {
			if c[k].Value != f.Value {
				out = append(out, f.Path)
				break
			}
		}
	}
	return out
}

// Randomization is the table's randomization column: none when the fraction and scale are fixed,
// else the randomization of the ranged ones.
func (r Row) Randomization() string {
	var parts []string
	rf, rs := randOf(r.Frac), randOf(r.Scale)
	if r.ShieldRows > 0 {
		rf = gelo.RandNone
	}
	switch {
	case rf == gelo.RandNone && rs == gelo.RandNone:
		return "none"
	case rf == rs:
		return string(rf)
	}
	if rf != gelo.RandNone {
		parts = append(parts, "fraction "+string(rf))
	}
	if rs != gelo.RandNone {
		parts = append(parts, "scale "+string(rs))
	}
	return strings.Join(parts, ", ")
}

func randOf(r gelo.Range) gelo.Randomization {
	if r.Rand == "" || r.Min == r.Max && r.Rand == gelo.RandNone {
		return gelo.RandNone
	}
	return r.Rand
}

// FracText is the fraction column: the value, its [min, max], or the fixed shield count.
func (r Row) FracText() string {
	if r.ShieldRows > 0 {
		return fmt.Sprintf("%d rows", r.ShieldRows)
	}
	return rangeText(r.Frac)
}

// ScaleText is the scale column: the value or its [min, max].
func (r Row) ScaleText() string { return rangeText(r.Scale) }

func rangeText(r gelo.Range) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if r.Min == r.Max {
		return f(r.Min)
	}
	return "[" + f(r.Min) + ", " + f(r.Max) + "]"
}

var randRank = map[string]int{"none": 0, "uniform": 1, "log_uniform": 2}

func less(a, b Row) bool {
	if a.Task != b.Task {
		return a.Task < b.Task
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	ra, rb := a.Randomization(), b.Randomization()
	if ra != rb {
		ka, oka := randRank[ra]
		kb, okb := randRank[rb]
		if oka && okb {
			return ka < kb
		}
		if oka != okb {
			return oka
		}
		return ra < rb
	}
	if a.ShieldRows != b.ShieldRows {
		return a.ShieldRows < b.ShieldRows
	}
	for _, p := range [][2]float64{{a.Frac.Min, b.Frac.Min}, {a.Frac.Max, b.Frac.Max}, {a.Scale.Min, b.Scale.Min}, {a.Scale.Max, b.Scale.Max}} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	for i := range a.Extra {
		if c := compareValues(a.Extra[i], b.Extra[i]); c != 0 {
			return c < 0
		}
	}
	return a.Cell < b.Cell
}

// compareValues orders numbers numerically and anything else as text.
func compareValues(a, b string) int {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	switch {
	case errA == nil && errB == nil && x != y:
		if x < y {
			return -1
		}
		return 1
	case errA == nil && errB != nil:
		return -1
	case errA != nil && errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// Tasks lists the tasks of the finished rows, sorted.
func (r *Report) Tasks() []string {
	var out []string
	for _, row := range r.Rows {
		if len(out) == 0 || out[len(out)-1] != row.Task {
			out = append(out, row.Task)
		}
	}
	return out
}

// Write collects the sweep in dir and writes report.md, report.csv and one PNG plot per task into
// it. It returns the report and the paths written.
func Write(dir string) (*Report, []string, error) {
	r, err := Collect(dir)
	if err != nil {
		return nil, nil, err
	}
	var written []string
	put := func(name string, b []byte) error {
		p := filepath.Join(dir, name)
		if err := checkpoints.WriteFileAtomic(p, b); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		written = append(written, p)
		return nil
	}
	plots := map[string]string{}
	for _, task := range r.Tasks() {
		png, err := r.Plot(task)
		if err != nil {
			return nil, nil, err
		}
		if png == nil {
			continue
		}
		name := PlotFile(task)
		if err := put(name, png); err != nil {
			return nil, nil, err
		}
		plots[task] = name
	}
	if err := put(MarkdownFile, r.Markdown(plots)); err != nil {
		return nil, nil, err
	}
	csv, err := r.CSV()
	if err != nil {
		return nil, nil, err
	}
	if err := put(CSVFile, csv); err != nil {
		return nil, nil, err
	}
	return r, written, nil
}

// PlotFile is the name of a task's plot of val mass against shield scale.
func PlotFile(task string) string { return "mass_vs_scale-" + task + ".png" }
