package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// SeedRow is one cell across the directories of several runs of the same sweep (one per seed,
// `sweep -seed N -out DIR`), so that a ± reflects training as well as evaluation.
type SeedRow struct {
	// Name is the cell's label, else its directory name; Task its model's task.
	Name, Task string
	// Val is the val mass in each directory, NaN where the cell has not finished there; Chance the
	// mean of its val chance over the directories where it has.
	Val    []float64
	Chance float64
	// PaperVal is the paper's val figure, NaN when the cell has none.
	PaperVal float64
}

// Stats are the mean and the sample standard deviation of the finished seeds, and their count
// (SD NaN below two seeds).
func (s SeedRow) Stats() (mean, sd float64, n int) {
	var sum, sq float64
	for _, v := range s.Val {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN(), math.NaN(), 0
	}
	mean = sum / float64(n)
	for _, v := range s.Val {
		if !math.IsNaN(v) {
			sq += (v - mean) * (v - mean)
		}
	}
	sd = math.NaN()
	if n > 1 {
		sd = math.Sqrt(sq / float64(n-1))
	}
	return mean, sd, n
}

// Seeds matches the cells of rs (runs of one sweep) by directory name, in the order they first
// appear (rs[0]'s rows first): one row per cell finished in at least one of them.
func Seeds(rs []*Report) []SeedRow {
	var out []SeedRow
	at := map[string]int{}
	for i, r := range rs {
		for _, row := range r.Rows {
			j, ok := at[row.Cell]
			if !ok {
				name := row.Label
				if name == "" {
					name = row.Cell
				}
				s := SeedRow{Name: name, Task: row.Task, Val: make([]float64, len(rs)), PaperVal: math.NaN()}
				for k := range s.Val {
					s.Val[k] = math.NaN()
				}
				j, at[row.Cell] = len(out), len(out)
				out = append(out, s)
			}
			mass := metricsFor(row.Task, r.Rows).mass
			out[j].Val[i] = get(row.Final["val"], mass)
			out[j].Chance += get(row.Final["val"], mass+"_chance")
			if row.Paper != nil {
				out[j].PaperVal = row.Paper.Val
			}
		}
	}
	for j := range out {
		if _, _, n := out[j].Stats(); n > 0 {
			out[j].Chance /= float64(n)
		}
	}
	return out
}

// SeedsMarkdown is the table of rows: each directory's val mass, the mean ± SD over those finished,
// the share of the paper's mass above paperChance the mean reaches, and a summary: how many cells
// finished in every directory, how many of those carry the paper's figures, and the pairs of the
// latter whose means are ordered against the paper's.
func SeedsMarkdown(rows []SeedRow, dirs []string, paperChance float64) []byte {
	var b bytes.Buffer
	b.WriteString("| cell | paper val |")
	for _, d := range dirs {
		fmt.Fprintf(&b, " %s |", d)
	}
	b.WriteString(" mean ± SD (seeds) | share of the paper's mass above chance (mean) |\n|---|---|")
	for range dirs {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	num := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.4f", v)
	}
	everywhere := 0             // cells finished in every directory
	var names []string          // those of them with the paper's figure,
	var means, papers []float64 // and their mean and the paper's val
	for _, s := range rows {
		mean, sd, n := s.Stats()
		fmt.Fprintf(&b, "| %s | %s |", s.Name, num(s.PaperVal))
		for _, v := range s.Val {
			fmt.Fprintf(&b, " %s |", num(v))
		}
		share := ratio(mean-s.Chance, s.PaperVal-paperChance)
		shareText := "–"
		if !math.IsNaN(share) {
			shareText = fmt.Sprintf("%.1f%%", 100*share)
		}
		fmt.Fprintf(&b, " %s ± %s (%d) | %s |\n", num(mean), num(sd), n, shareText)
		if n != len(dirs) {
			continue
		}
		everywhere++
		if !math.IsNaN(s.PaperVal) {
			names, means, papers = append(names, s.Name), append(means, mean), append(papers, s.PaperVal)
		}
	}
	_, inv := inversions(means, papers)
	against := make([]string, len(inv))
	for k, ij := range inv {
		against[k] = names[ij[0]] + "/" + names[ij[1]]
	}
	fmt.Fprintf(&b, "\nCells finished in all %d directories: %d, %d of them with the paper's figures; of their %d pairs, %d ordered against the paper on the means",
		len(dirs), everywhere, len(names), len(names)*(len(names)-1)/2, len(against))
	if len(against) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(against, ", "))
	}
	b.WriteString(".\n")
	return b.Bytes()
}
