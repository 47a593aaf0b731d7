package sweep

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The paper's rows are chosen by label, in the sweep's order whatever the order given, each once.
func TestSelectCellsByLabelOfThePaperSweep(t *testing.T) {
	sw, err := Load("../configs/sweeps/paper-retrieval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := sw.SelectCells("R12,R4, R7,R4")
	if err != nil || !slices.Equal(got, []int{3, 6, 11}) {
		t.Fatalf("R12,R4, R7,R4: %v, %v; want [3 6 11]", got, err)
	}
	for _, i := range got {
		if want := []string{"R4", "R7", "R12"}[slices.Index(got, i)]; sw.Cells[i].Label != want {
			t.Errorf("cell %d is %s, want %s", i, sw.Cells[i].Label, want)
		}
	}
	_, err = sw.SelectCells("R4,R13")
	if err == nil || !strings.Contains(err.Error(), `has no cell "R13"; its cells are R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11, R12 (see -list)`) {
		t.Fatalf("R13: %v", err)
	}
	// Labels are case-sensitive, as the directory names they are.
	if _, err := sw.SelectCells("r4"); err == nil {
		t.Fatal("r4 accepted for R4")
	}
}

// An unlabelled cell's name holds commas; the longest run of pieces naming a cell is taken, so a
// label that is the first piece of another cell's name does not hide that cell.
func TestSelectCellsByNameWithCommas(t *testing.T) {
	sw := mustParse(t, tinyBase+"cells:\n"+
		"  - {label: seed=1, sampler.shield_scale: 2}\n"+
		"  - {seed: 1, sampler.shield_scale: 3}\n"+
		"  - {seed: 2, sampler.shield_scale: 3}\n")
	names := []string{sw.Cells[0].Name, sw.Cells[1].Name, sw.Cells[2].Name}
	if !slices.Equal(names, []string{"seed=1", "seed=1,shield_scale=3", "seed=2,shield_scale=3"}) {
		t.Fatalf("names %q", names)
	}
	for _, tc := range []struct {
		list string
		want []int
	}{
		{"seed=1", []int{0}},
		{"seed=1,shield_scale=3", []int{1}},
		{"seed=2,shield_scale=3,seed=1", []int{0, 2}},
		{"seed=1,seed=1,shield_scale=3", []int{0, 1}},
	} {
		got, err := sw.SelectCells(tc.list)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.list, got, err, tc.want)
		}
	}
	_, err := sw.SelectCells("seed=1,shield_scale=4")
	if err == nil || !strings.Contains(err.Error(), `no cell "shield_scale=4"; its cells are seed=1; seed=1,shield_scale=3; seed=2,shield_scale=3`) {
		t.Fatalf("unknown second piece: %v", err)
	}
	for _, bad := range []string{"", ",", "seed=1,", ",seed=1", "seed=1,,seed=2,shield_scale=3"} {
		if _, err := sw.SelectCells(bad); err == nil || !strings.Contains(err.Error(), "an empty name") {
			t.Errorf("%q: %v, want an empty-name error", bad, err)
		}
	}
}

// The unknown name, typed or pasted, reaches the terminal escaped.
func TestSelectCellsErrorIsEscaped(t *testing.T) {
	sw := mustParse(t, fourCells)
	_, err := sw.SelectCells("R1\x1b]0;owned\x07\u202e")
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07\u202e") || !strings.Contains(err.Error(), `\x1b`) {
		t.Fatalf("error %q, want the control characters escaped", err)
	}
}

// Only the chosen cells run, in order; the others are left untouched and stay in the plan (so
// the report names them as not finished); a second run skips what the first finished.
func TestRunChosenCellsOnly(t *testing.T) {
	sw := mustParse(t, fourCells)
	out := t.TempDir()
	chosen, err := sw.SelectCells(sw.Cells[3].Name + "," + sw.Cells[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTrainer{}
	var log bytes.Buffer
	sum, err := Run(context.Background(), sw, Options{Out: out, Cells: chosen, Progress: &log, Train: f.train})
	if err != nil {
		t.Fatal(err)
	}
	want := []call{{sw.Cells[1].Name, false}, {sw.Cells[3].Name, false}}
	if !slices.Equal(f.calls, want) || len(sum.Cells) != 2 || sum.Cells[0].Index != 1 || sum.Cells[1].Index != 3 {
		t.Fatalf("calls %v, summary %+v; want %v", f.calls, sum.Cells, want)
	}
	for _, w := range []string{"4 cells, 2 chosen", "cell 2/4 (1 of 2 chosen) " + sw.Cells[1].Name + ": starting", "cell 4/4 (2 of 2 chosen) " + sw.Cells[3].Name} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, log.String())
		}
	}
	for i, c := range sw.Cells {
		st, err := Inspect(filepath.Join(out, c.Name))
		if err != nil || st.Finished != (i == 1 || i == 3) || (st.Exists && !st.Finished) {
			t.Errorf("cell %s: %+v %v", c.Name, st, err)
		}
	}
	if p, err := ReadPlan(out); err != nil || len(p.Cells) != 4 {
		t.Fatalf("plan %+v, %v; want all 4 cells", p, err)
	}
	// Choosing a finished cell again skips it; the whole sweep then runs only the two left.
	f2 := &fakeTrainer{}
	sum, err = Run(context.Background(), sw, Options{Out: out, Cells: []int{1}, Train: f2.train})
	if err != nil || len(f2.calls) != 0 || sum.Count(Skipped) != 1 {
		t.Fatalf("chosen again: %v, calls %v, outcomes %v", err, f2.calls, outcomes(sum))
	}
	f3 := &fakeTrainer{}
	if _, err := Run(context.Background(), sw, Options{Out: out, Train: f3.train}); err != nil {
		t.Fatal(err)
	}
	if want := []call{{sw.Cells[0].Name, false}, {sw.Cells[2].Name, false}}; !slices.Equal(f3.calls, want) {
		t.Fatalf("whole sweep after: calls %v, want %v", f3.calls, want)
	}
}

func TestRunRefusesBadChosenCells(t *testing.T) {
	sw := mustParse(t, fourCells)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Cells: []int{0}, Shard: Shard{Index: 1, Count: 2}}, "chosen cells and shard 1/2"},
		{Options{Cells: []int{4}}, "want increasing indices in [0, 4)"},
		{Options{Cells: []int{-1}}, "want increasing indices"},
		{Options{Cells: []int{2, 1}}, "want increasing indices"},
		{Options{Cells: []int{1, 1}}, "want increasing indices"},
	} {
		f := &fakeTrainer{}
		tc.o.Out, tc.o.Train = t.TempDir(), f.train
		if _, err := Run(context.Background(), sw, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) || len(f.calls) != 0 {
			t.Errorf("%+v: %v (calls %v), want %q", tc.o.Cells, err, f.calls, tc.want)
		}
	}
}
