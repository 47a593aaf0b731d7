package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabelNamesTheCellAndPaperIsKept(t *testing.T) {
	sw := mustParse(t, tinyBase+"cells:\n  - label: R7\n    sampler.shield_scale: 2\n    paper: {train: 0.3641, val: 0.3737}\n  - {sampler.shield_scale: 3}\n")
	c := sw.Cells[0]
	if c.Name != "R7" || c.Label != "R7" || c.Paper == nil || c.Paper.Train != 0.3641 || c.Paper.Val != 0.3737 || c.Config.Name != "R7" {
		t.Fatalf("cell %+v", c)
	}
	if d := sw.Cells[1]; d.Name != "shield_scale=3" || d.Label != "" || d.Paper != nil {
		t.Fatalf("unlabelled cell %+v", d)
	}
	p := sw.Plan()
	if p.Cells[0].Label != "R7" || p.Cells[0].Paper == nil || p.Cells[1].Paper != nil {
		t.Fatalf("plan %+v", p)
	}
	b, _ := p.encode()
	if !strings.Contains(string(b), `"label": "R7"`) || strings.Count(string(b), `"paper"`) != 1 {
		t.Fatalf("plan file:\n%s", b)
	}
}

func TestLabelAndPaperErrors(t *testing.T) {
	for _, tc := range []struct{ name, cells, want string }{
		{"duplicate label", "  - {label: R1, sampler.shield_scale: 2}\n  - {label: R1, sampler.shield_scale: 3}\n", `sw.yaml:13:13: label: label "R1" is already`},
		{"unsafe label", "  - {label: a/b, sampler.shield_scale: 2}\n", "sw.yaml:12:13: label: want a label"},
		{"paper above 1", "  - {label: R1, sampler.shield_scale: 2, paper: {train: 1.5, val: 0.1}}\n", "sw.yaml:12:57: paper.train: 1.5, want a number in [0, 1]"},
		{"paper not a number", "  - {sampler.shield_scale: 2, paper: {train: x, val: 0.1}}\n", "paper.train: x, want a number in [0, 1]"},
		{"paper unknown key", "  - {sampler.shield_scale: 2, paper: {train: 0.1, val: 0.1, test: 0.2}}\n", `sw.yaml:12:61: paper: unknown key "test" (want train, val)`},
		{"paper missing val", "  - {sampler.shield_scale: 2, paper: {train: 0.1}}\n", "paper: missing val"},
		{"unknown reserved key", "  - {sampler.shield_scale: 2, paper_alt: {train: 0.1, val: 0.2}}\n", `sw.yaml:12:31: cells: unknown key "paper_alt"`},
		{"label with a grid", "  - {label: R1, sampler.shield_scale: 2}\naxes:\n  seed: [1, 2]\n", "sw.yaml:12:13: cells: a cell entry with label or paper names one setting"},
		{"label takes another cell's name", "  - {label: shield_scale=3, sampler.shield_scale: 2}\n  - {sampler.shield_scale: 3}\n", `label: label "shield_scale=3" is also the name of cell 2`},
	} {
		_, err := Parse("sw.yaml", []byte(tinyBase+"cells:\n"+tc.cells))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCellsFromBorrowsAnotherSweepsCellsOntoThisBase(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The lender has another base (a different seed) and labelled cells.
	write("lender.yaml", strings.Replace(tinyBase, "seed: 7", "seed: 99", 1)+
		"cells:\n  - label: R7\n    sampler.shield_scale: 2\n    paper: {train: 0.3641, val: 0.3737}\n  - {sampler.shield_scale: 3}\n")
	p := write("twin.yaml", "name: twin\n"+tinyBase+"cells_from: lender.yaml\n")
	sw, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Cells) != 2 || sw.Cells[0].Label != "R7" || sw.Cells[0].Paper == nil || sw.Cells[0].Paper.Val != 0.3737 ||
		sw.Cells[1].Name != "shield_scale=3" {
		t.Fatalf("cells %+v", sw.Cells)
	}
	for _, c := range sw.Cells {
		if c.Config.Seed != 7 {
			t.Errorf("cell %s: seed %d, want the borrowing file's base seed 7", c.Name, c.Config.Seed)
		}
	}
	if s := sw.Cells[0].Config.Sampler.ShieldScale; s.Min != 2 || s.Max != 2 {
		t.Errorf("R7: shield scale %v, want the lender's 2", s)
	}

	write("chain.yaml", tinyBase+"cells_from: twin.yaml\n")
	write("bad.yaml", tinyBase+"cells:\n  - {sampler.shield_knd: 2}\n")
	for _, tc := range []struct{ src, want string }{
		{tinyBase + "cells_from: lender.yaml\ncells:\n  - {seed: 1}\n", "set cells_from or axes/cells, not both"},
		{tinyBase + "cells_from: missing.yaml\n", "missing.yaml"},
		{tinyBase + "cells_from: chain.yaml\n", "borrows its cells too"},
		{tinyBase + "cells_from: bad.yaml\n", "bad.yaml:12:"},
		{tinyBase + "cells_from: [a]\n", "want the path of a sweep file"},
	} {
		_, err := Load(write("borrower.yaml", tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src[len(tinyBase):], err, tc.want)
		}
	}
}
