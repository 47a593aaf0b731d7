package report

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/sweep"
)

// Cells with the paper's figures: the tables gain label, paper train and paper val, in the
// sweep's order, and the plot still renders (with the paper's points).
func TestPaperReferencesBesideOurs(t *testing.T) {
	dir := t.TempDir()
	cells := []cell{
		{name: "R2", edit: kindScale(gelo.ShieldManifold, 4), final: retrieval(0.2, 0.15, 0.02, 0.25, 0.2)},
		{name: "R1", edit: kindScale(gelo.ShieldGaussian, 1), final: retrieval(0.7, 0.65, 0.03, 0.8, 0.5)},
		{name: "plain", edit: kindScale(gelo.ShieldGaussian, 0.5), final: retrieval(0.6, 0.55, 0.02, 0.7, 0.45)},
		{name: "R3", noDir: true},
	}
	makeSweep(t, dir, cells)
	// Give the plan its labels and references, as sweep.Run writes them.
	plan, err := sweep.ReadPlan(dir)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]*sweep.Reference{"R1": {Train: 0.8318, Val: 0.8212}, "R2": {Train: 0.0704, Val: 0.0723}, "R3": {Train: 0.5, Val: 0.4}}
	for i := range plan.Cells {
		if r, ok := refs[plan.Cells[i].Name]; ok {
			plan.Cells[i].Label, plan.Cells[i].Paper = plan.Cells[i].Name, r
		}
	}
	b, _ := json.MarshalIndent(plan, "", "  ")
	write(t, filepath.Join(dir, sweep.PlanFile), b)

	r, _, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	md := string(r.Markdown(map[string]string{"retrieval": PlotFile("retrieval")}))
	for _, want := range []string{
		"| label | kind | fraction | scale | randomization | train mass | val mass | paper train | paper val | chance (train / val) | val top1 | val recall | steps |",
		// Plan order (R2, R1, plain), not kind order.
		"| R2 | manifold | 0.1 | 4 | none | 0.2000 | 0.1500 ± 0.0200 | 0.0704 | 0.0723 | 0.0625 / 0.0725 |",
		"| R1 | gaussian | 0.1 | 1 | none | 0.7000 | 0.6500 ± 0.0300 | 0.8318 | 0.8212 | 0.0625 / 0.0725 |",
		"| - | gaussian | 0.1 | 0.5 | none | 0.6000 | 0.5500 ± 0.0200 | - | - | 0.0625 / 0.0725 |",
		"Hollow rings are the paper's val figures",
		"| `R3` | not started |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "| R2 |") > strings.Index(md, "| R1 |") {
		t.Errorf("rows not in the sweep's order:\n%s", md)
	}
	csv, err := os.ReadFile(filepath.Join(dir, CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(csv), "\n")
	if !strings.HasPrefix(lines[0], "cell,status,label,task,") || !strings.HasSuffix(lines[0], "val_chance,paper_train,paper_val,val_top1,val_recall") {
		t.Errorf("csv header %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "R2,finished,R2,retrieval,manifold,") || !strings.Contains(lines[1], ",0.0704,0.0723,") {
		t.Errorf("csv row %q", lines[1])
	}
	if !strings.HasPrefix(lines[3], "plain,finished,,retrieval,") || !strings.Contains(lines[3], ",0.0725,,,") {
		t.Errorf("csv row without a reference %q", lines[3])
	}
	f, err := os.Open(filepath.Join(dir, PlotFile("retrieval")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatal(err)
	}
}
