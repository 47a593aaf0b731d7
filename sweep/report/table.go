package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// taskMetrics says which figures a task's table shows.
type taskMetrics struct {
	// title heads the task's section.
	title string
	// mass is the main metric; mass+"_chance" and mass+"_se" are its chance level and standard error.
	mass string
	// extra are further val metrics shown after the chance column.
	extra []string
}

var metricsOf = map[string]taskMetrics{
	"retrieval": {title: "Text presence (task retrieval): positive mass", mass: "pos_mass", extra: []string{"top1", "recall"}},
	"unmix":     {title: "Unmixing (task unmix): same-embedding mass", mass: "unmix_mass", extra: []string{"random_mass", "cos_mean", "cos_p95", "random_cos_p95"}},
}

// metricsFor falls back, for a task this package does not know, to the first metric with a
// chance level.
func metricsFor(task string, rows []Row) taskMetrics {
	if m, ok := metricsOf[task]; ok {
		return m
	}
	for _, r := range rows {
		var names []string
		for k := range r.Final["val"] {
			if base, ok := strings.CutSuffix(k, "_chance"); ok {
				names = append(names, base)
			}
		}
		if len(names) > 0 {
			sort.Strings(names)
			return taskMetrics{title: "Task " + task + ": " + names[0], mass: names[0]}
		}
	}
	return taskMetrics{title: "Task " + task, mass: "mass"}
}

// num formats a metric with 4 decimals; a missing one is "-".
func num(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok || math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// label is a column's header for a dotted path: its last key, or the whole path when two extra
// columns share the last key.
func (r *Report) label(path string) string {
	last := path[strings.LastIndexByte(path, '.')+1:]
	for _, p := range r.ExtraCols {
		if p != path && (p == last || strings.HasSuffix(p, "."+last)) {
			return path
		}
	}
	return last
}

// Markdown renders the report: a table per task in the paper's layout, the plots (plots maps a
// task to its PNG's file name), and the cells that have not finished.
func (r *Report) Markdown(plots map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Sweep %s\n\n", r.Sweep)
	fmt.Fprintf(&b, "%d cells: %d finished, %d not finished", r.Cells, len(r.Rows), len(r.Unfinished))
	if len(r.Unfinished) > 0 {
		b.WriteString(" (listed at the end)")
	}
	b.WriteString(".\n")
	for _, task := range r.Tasks() {
		var rows []Row
		for _, row := range r.Rows {
			if row.Task == task {
				rows = append(rows, row)
			}
		}
		tm := metricsFor(task, rows)
		fmt.Fprintf(&b, "\n## %s\n\n", tm.title)
		fmt.Fprintf(&b, "Each row is one cell trained from scratch; mass is SPEC §6's %s on fresh examples of the "+
			"split (val: texts never trained on), ± its standard error, beside its chance level computed on the same examples.\n\n", tm.mass)
		refs := r.HasLabels()
		if refs {
			b.WriteString("Paper train / val are the paper's figures for the same setting (the sweep file's `paper`, " +
				"its label naming the paper's row), beside ours.\n\n")
		}
		var head []string
		if refs {
			head = append(head, "label")
		}
		head = append(head, "kind", "fraction", "scale", "randomization")
		for _, p := range r.ExtraCols {
			head = append(head, r.label(p))
		}
		head = append(head, "train mass", "val mass")
		if refs {
			head = append(head, "paper train", "paper val")
		}
		head = append(head, "chance (train / val)")
		for _, e := range tm.extra {
			head = append(head, "val "+strings.ReplaceAll(e, "_", " "))
		}
		head = append(head, "steps")
		writeMDRow(&b, head)
		sep := make([]string, len(head))
		for i := range sep {
			sep[i] = "---"
		}
		writeMDRow(&b, sep)
		ranged := false
		for _, row := range rows {
			tr, va := row.Final["train"], row.Final["val"]
			var cells []string
			if refs {
				cells = append(cells, orDash(row.Label))
			}
			cells = append(cells, row.Kind, row.FracText(), row.ScaleText(), row.Randomization())
			cells = append(cells, row.Extra...)
			valMass := num(va, tm.mass)
			if se := num(va, tm.mass+"_se"); se != "-" && valMass != "-" {
				valMass += " ± " + se
			}
			cells = append(cells, num(tr, tm.mass), valMass)
			if refs {
				pt, pv := "-", "-"
				if row.Paper != nil {
					pt, pv = strconv.FormatFloat(row.Paper.Train, 'f', 4, 64), strconv.FormatFloat(row.Paper.Val, 'f', 4, 64)
				}
				cells = append(cells, pt, pv)
			}
			cells = append(cells, num(tr, tm.mass+"_chance")+" / "+num(va, tm.mass+"_chance"))
			for _, e := range tm.extra {
				cells = append(cells, num(va, e))
			}
			cells = append(cells, strconv.FormatInt(row.Steps, 10))
			writeMDRow(&b, cells)
			if row.Scale.Min != row.Scale.Max {
				ranged = true
			}
		}
		if p, ok := plots[task]; ok {
			fmt.Fprintf(&b, "\n![val %s vs shield scale](%s)\n", tm.mass, p)
			if refs {
				b.WriteString("\nHollow rings are the paper's val figures at the same settings.\n")
			}
			if ranged {
				b.WriteString("\nCells with a ranged shield scale are in the table, not in the plot.\n")
			}
		}
	}
	if len(r.Unfinished) > 0 {
		b.WriteString("\n## Cells not finished\n\nRun the sweep again to finish them (finished cells are skipped, interrupted ones resume).\n\n")
		writeMDRow(&b, []string{"cell", "state"})
		writeMDRow(&b, []string{"---", "---"})
		for _, u := range r.Unfinished {
			writeMDRow(&b, []string{"`" + u.Cell + "`", u.State})
		}
	}
	return b.Bytes()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeMDRow(b *bytes.Buffer, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	b.WriteString("\n")
}

// CSV renders one line per cell: the finished ones in table order with every figure at full
// precision, then the unfinished ones with their state and no figures.
func (r *Report) CSV() ([]byte, error) {
	var extraMetrics []string
	seen := map[string]bool{}
	for _, task := range r.Tasks() {
		for _, e := range metricsFor(task, r.Rows).extra {
			if !seen[e] {
				seen[e] = true
				extraMetrics = append(extraMetrics, e)
			}
		}
	}
	refs := r.HasLabels()
	head := []string{"cell", "status"}
	if refs {
		head = append(head, "label")
	}
	head = append(head, "task", "shield_kind", "shield_frac", "shield_rows", "shield_scale", "randomization")
	head = append(head, r.ExtraCols...)
	head = append(head, "steps", "train_mass", "train_mass_se", "train_chance", "val_mass", "val_mass_se", "val_chance")
	if refs {
		head = append(head, "paper_train", "paper_val")
	}
	for _, e := range extraMetrics {
		head = append(head, "val_"+e)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(head); err != nil {
		return nil, fmt.Errorf("report csv: %w", err)
	}
	full := func(m map[string]float64, k string) string {
		v, ok := m[k]
		if !ok {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, row := range r.Rows {
		tm := metricsFor(row.Task, r.Rows)
		tr, va := row.Final["train"], row.Final["val"]
		rec := []string{row.Cell, "finished"}
		if refs {
			rec = append(rec, row.Label)
		}
		rec = append(rec, row.Task, row.Kind, row.Frac.String(), strconv.Itoa(row.ShieldRows),
			row.Scale.String(), row.Randomization())
		rec = append(rec, row.Extra...)
		rec = append(rec, strconv.FormatInt(row.Steps, 10),
			full(tr, tm.mass), full(tr, tm.mass+"_se"), full(tr, tm.mass+"_chance"),
			full(va, tm.mass), full(va, tm.mass+"_se"), full(va, tm.mass+"_chance"))
		if refs {
			if row.Paper != nil {
				rec = append(rec, strconv.FormatFloat(row.Paper.Train, 'g', -1, 64), strconv.FormatFloat(row.Paper.Val, 'g', -1, 64))
			} else {
				rec = append(rec, "", "")
			}
		}
		for _, e := range extraMetrics {
			rec = append(rec, full(va, e))
		}
		if err := w.Write(rec); err != nil {
			return nil, fmt.Errorf("report csv: %w", err)
		}
	}
	for _, u := range r.Unfinished {
		rec := make([]string, len(head))
		rec[0], rec[1] = u.Cell, u.State
		if err := w.Write(rec); err != nil {
			return nil, fmt.Errorf("report csv: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("report csv: %w", err)
	}
	return b.Bytes(), nil
}
