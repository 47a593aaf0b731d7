package report

import (
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/sweep"
)

// seedRun is a report with cells A (paper 0.5) and B (paper 0.3), B finished only when withB.
func seedRun(a, b float64, withB bool) *Report {
	cell := func(name string, val, paper float64) Row {
		return Row{Cell: name, Label: name, Task: "retrieval", Paper: &sweep.Reference{Val: paper},
			Final: map[string]map[string]float64{"val": {"pos_mass": val, "pos_mass_chance": 0.0625}}}
	}
	r := &Report{Rows: []Row{cell("A", a, 0.5)}}
	if withB {
		r.Rows = append(r.Rows, cell("B", b, 0.3))
	}
	return r
}

// Seeds matches cells by name across runs; the mean, SD, share and the pairs against the paper
// are known answers.
func TestSeedsKnownAnswer(t *testing.T) {
	rows := Seeds([]*Report{seedRun(0.2, 0.4, true), seedRun(0.3, 0, false), seedRun(0.4, 0.5, true)})
	if len(rows) != 2 || rows[0].Name != "A" || rows[1].Name != "B" {
		t.Fatalf("rows %+v", rows)
	}
	mean, sd, n := rows[0].Stats()
	if !near(mean, 0.3, 1e-12) || !near(sd, 0.1, 1e-12) || n != 3 {
		t.Errorf("A: mean %v sd %v n %d, want 0.3, 0.1, 3", mean, sd, n)
	}
	if mean, sd, n := rows[1].Stats(); !near(mean, 0.45, 1e-12) || !near(sd, math.Sqrt(0.005), 1e-12) || n != 2 || !math.IsNaN(rows[1].Val[1]) {
		t.Errorf("B: mean %v sd %v n %d vals %v", mean, sd, n, rows[1].Val)
	}
	md := string(SeedsMarkdown(rows, []string{"s1", "s2", "s3"}, PaperChance))
	for _, want := range []string{
		"| cell | paper val | s1 | s2 | s3 | mean ± SD (seeds) |",
		"| A | 0.5000 | 0.2000 | 0.3000 | 0.4000 | 0.3000 ± 0.1000 (3) | 54.3% |", // (0.3-0.0625)/(0.5-0.0625)
		"| B | 0.3000 | 0.4000 | – | 0.5000 | 0.4500 ± 0.0707 (2) | 163.2% |",
		"Cells finished in all 3 directories: 1, 1 of them with the paper's figures; of their 0 pairs, 0 ordered against the paper",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// With B finished everywhere, A < B by the means while the paper has A > B: one pair against.
	rows = Seeds([]*Report{seedRun(0.2, 0.4, true), seedRun(0.4, 0.5, true)})
	if md := string(SeedsMarkdown(rows, []string{"s1", "s2"}, PaperChance)); !strings.Contains(md, "of their 1 pairs, 1 ordered against the paper on the means: A/B.") {
		t.Errorf("pairs:\n%s", md)
	}
}

// The summary counts every cell finished in all directories, whether or not it carries the
// paper's figures, and says how many do. Before, it counted only those with the paper's figures
// under "cells finished in all N directories" (0 for a sweep without them).
func TestSeedsSummaryCountsEveryCellFinishedEverywhere(t *testing.T) {
	run := func(a, c float64) *Report {
		r := seedRun(a, 0, false)
		r.Rows = append(r.Rows, Row{Cell: "C", Task: "retrieval",
			Final: map[string]map[string]float64{"val": {"pos_mass": c, "pos_mass_chance": 0.0625}}})
		return r
	}
	rows := Seeds([]*Report{run(0.2, 0.3), run(0.4, 0.5)})
	md := string(SeedsMarkdown(rows, []string{"s1", "s2"}, PaperChance))
	if want := "Cells finished in all 2 directories: 2, 1 of them with the paper's figures; of their 0 pairs"; !strings.Contains(md, want) {
		t.Errorf("summary lacks %q:\n%s", want, md)
	}
}
