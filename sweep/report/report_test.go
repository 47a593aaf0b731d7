package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/sweep"
)

// cell is a hand-made finished (or not) cell.
type cell struct {
	name  string
	edit  func(*config.Run)
	final map[string]map[string]float64 // nil: no report.json
	ckpt  int64                         // > 0: a checkpoint pointer at this step
	noDir bool
}

func retrieval(trainMass, valMass, se, top1, recall float64) map[string]map[string]float64 {
	return map[string]map[string]float64{
		"train": {"pos_mass": trainMass, "pos_mass_chance": 0.0625, "pos_mass_se": 0.01, "top1": 0.5, "top1_chance": 0.0625},
		"val":   {"pos_mass": valMass, "pos_mass_chance": 0.0725, "pos_mass_se": se, "top1": top1, "top1_chance": 0.0725, "recall": recall, "recall_chance": 0.0725},
	}
}

func kindScale(kind gelo.ShieldKind, scale float64) func(*config.Run) {
	return func(c *config.Run) {
		c.Sampler.ShieldKind = kind
		c.Sampler.ShieldScale = gelo.Fixed(scale)
	}
}

// makeSweep writes a sweep directory: its plan and the cells' files.
func makeSweep(t *testing.T, dir string, cells []cell) {
	t.Helper()
	plan := sweep.Plan{Sweep: "hand", Cells: []sweep.PlanCell{}}
	for _, c := range cells {
		plan.Cells = append(plan.Cells, sweep.PlanCell{Name: c.name, Settings: []sweep.PlanSetting{}})
		if c.noDir {
			continue
		}
		cdir := filepath.Join(dir, c.name)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.Name = c.name
		cfg.Train.Steps = 200
		if c.edit != nil {
			c.edit(&cfg)
		}
		b, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(cdir, sweep.ConfigFile), b)
		if c.final != nil {
			b, _ := json.Marshal(map[string]any{"steps": 200, "final": c.final})
			write(t, filepath.Join(cdir, sweep.ReportFile), b)
		}
		if c.ckpt > 0 {
			write(t, filepath.Join(cdir, checkpoints.LatestFile), []byte(checkpoints.CheckpointName(c.ckpt)+"\n"))
		}
	}
	b, _ := json.MarshalIndent(plan, "", "  ")
	write(t, filepath.Join(dir, sweep.PlanFile), b)
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The cells are listed out of table order on purpose: the table sorts them.
var handCells = []cell{
	{name: "m-1", edit: kindScale(gelo.ShieldManifold, 1), final: retrieval(0.7, 0.65, 0.03, 0.8, 0.5)},
	{name: "g-4", edit: kindScale(gelo.ShieldGaussian, 4), final: retrieval(0.2, 0.15, 0.02, 0.25, 0.2)},
	{name: "g-ranged", edit: func(c *config.Run) {
		c.Sampler.ShieldFrac = gelo.LogUniform(0.05, 0.5)
		c.Sampler.ShieldScale = gelo.LogUniform(0.25, 4)
	}, final: retrieval(0.4, 0.35, 0.025, 0.5, 0.3)},
	{name: "g-0.5", edit: kindScale(gelo.ShieldGaussian, 0.5), final: retrieval(0.61, 0.55123, 0.02, 0.7, 0.45)},
	{name: "m-4", noDir: true},
	{name: "m-0.5", edit: kindScale(gelo.ShieldManifold, 0.5), ckpt: 50},
}

func TestMarkdownAndCSVKnownAnswer(t *testing.T) {
	dir := t.TempDir()
	makeSweep(t, dir, handCells)
	r, files, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("wrote %v", files)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	want := "# Sweep hand\n\n" +
		"6 cells: 4 finished, 2 not finished (listed at the end).\n\n" +
		"## Text presence (task retrieval): positive mass\n\n" +
		"Each row is one cell trained from scratch; mass is SPEC §6's pos_mass on fresh examples of the split (val: texts never trained on), ± its standard error, beside its chance level computed on the same examples.\n\n" +
		"| kind | fraction | scale | randomization | train mass | val mass | chance (train / val) | val top1 | val recall | steps |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| gaussian | 0.1 | 0.5 | none | 0.6100 | 0.5512 ± 0.0200 | 0.0625 / 0.0725 | 0.7000 | 0.4500 | 200 |\n" +
		"| gaussian | 0.1 | 4 | none | 0.2000 | 0.1500 ± 0.0200 | 0.0625 / 0.0725 | 0.2500 | 0.2000 | 200 |\n" +
		"| gaussian | [0.05, 0.5] | [0.25, 4] | log_uniform | 0.4000 | 0.3500 ± 0.0250 | 0.0625 / 0.0725 | 0.5000 | 0.3000 | 200 |\n" +
		"| manifold | 0.1 | 1 | none | 0.7000 | 0.6500 ± 0.0300 | 0.0625 / 0.0725 | 0.8000 | 0.5000 | 200 |\n" +
		"\n![val pos_mass vs shield scale](mass_vs_scale-retrieval.png)\n" +
		"\nCells with a ranged shield scale are in the table, not in the plot.\n" +
		"\n## Cells not finished\n\nRun the sweep again to finish them (finished cells are skipped, interrupted ones resume).\n\n" +
		"| cell | state |\n| --- | --- |\n" +
		"| `m-4` | not started |\n" +
		"| `m-0.5` | unfinished (checkpoint at step 50) |\n"
	if string(md) != want {
		t.Fatalf("report.md:\n%s\nwant:\n%s", md, want)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, CSVFile))
	wantCSV := "cell,status,task,shield_kind,shield_frac,shield_rows,shield_scale,randomization,steps,train_mass,train_mass_se,train_chance,val_mass,val_mass_se,val_chance,val_top1,val_recall\n" +
		"g-0.5,finished,retrieval,gaussian,0.1,0,0.5,none,200,0.61,0.01,0.0625,0.55123,0.02,0.0725,0.7,0.45\n" +
		"g-4,finished,retrieval,gaussian,0.1,0,4,none,200,0.2,0.01,0.0625,0.15,0.02,0.0725,0.25,0.2\n" +
		"g-ranged,finished,retrieval,gaussian,\"{min: 0.05, max: 0.5, rand: log_uniform}\",0,\"{min: 0.25, max: 4, rand: log_uniform}\",log_uniform,200,0.4,0.01,0.0625,0.35,0.025,0.0725,0.5,0.3\n" +
		"m-1,finished,retrieval,manifold,0.1,0,1,none,200,0.7,0.01,0.0625,0.65,0.03,0.0725,0.8,0.5\n" +
		"m-4,not started,,,,,,,,,,,,,,,\n" +
		"m-0.5,unfinished (checkpoint at step 50),,,,,,,,,,,,,,,\n"
	if string(csv) != wantCSV {
		t.Fatalf("report.csv:\n%s\nwant:\n%s", csv, wantCSV)
	}
	if len(r.ExtraCols) != 0 {
		t.Errorf("extra columns %v: cell names and shield settings are not extra", r.ExtraCols)
	}
}

func TestPlotIsAPNGAndDeterministic(t *testing.T) {
	dir := t.TempDir()
	makeSweep(t, dir, handCells)
	if _, _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, PlotFile("retrieval"))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w < 400 || h < 250 {
		t.Fatalf("plot is %dx%d", w, h)
	}
	// Not blank: a plot has many colours (lines, text, grid) on its white background.
	colours := map[[4]uint32]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 3 {
		for x := 0; x < img.Bounds().Dx(); x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if len(colours) < 10 {
		t.Fatalf("plot has only %d colours", len(colours))
	}
	// Same cells, same bytes.
	if _, _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(p); !bytes.Equal(b, b2) {
		t.Fatal("the plot changed between two reports of the same cells")
	}
}

func TestNoPlotWithoutFixedScales(t *testing.T) {
	dir := t.TempDir()
	makeSweep(t, dir, []cell{handCells[2]})
	r, files, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("wrote %v, want report.md and report.csv only", files)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if bytes.Contains(md, []byte(".png")) || len(r.Rows) != 1 {
		t.Fatalf("report.md:\n%s", md)
	}
}

func TestVaryingFieldsBecomeColumnsAndSortNumerically(t *testing.T) {
	dir := t.TempDir()
	obs := func(v float64) func(*config.Run) {
		return func(c *config.Run) { c.Sampler.ObsRows = v }
	}
	makeSweep(t, dir, []cell{
		{name: "a", edit: obs(1), final: retrieval(0.5, 0.5, 0.01, 0.5, 0.5)},
		{name: "b", edit: obs(0.25), final: retrieval(0.5, 0.4, 0.01, 0.5, 0.5)},
		{name: "c", edit: obs(0.5), final: retrieval(0.5, 0.3, 0.01, 0.5, 0.5)},
	})
	r, err := Collect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ExtraCols) != 1 || r.ExtraCols[0] != "sampler.obs_rows" {
		t.Fatalf("extra columns %v, want [sampler.obs_rows]", r.ExtraCols)
	}
	var order []string
	for _, row := range r.Rows {
		order = append(order, row.Cell+"="+row.Extra[0])
	}
	if strings.Join(order, " ") != "b=0.25 c=0.5 a=1" {
		t.Fatalf("rows %v", order)
	}
	md := string(r.Markdown(nil))
	if !strings.Contains(md, "| kind | fraction | scale | randomization | obs_rows | train mass |") {
		t.Fatalf("header:\n%s", md)
	}
	// One line per obs_rows value in the plot.
	if got := group(r, r.Rows); len(got) != 3 || got[0].label != "gaussian, obs_rows=0.25" {
		t.Fatalf("plot lines %+v", got)
	}
}

func TestWithoutAPlanEveryCellDirectoryCounts(t *testing.T) {
	dir := t.TempDir()
	makeSweep(t, dir, handCells)
	if err := os.Remove(filepath.Join(dir, sweep.PlanFile)); err != nil {
		t.Fatal(err)
	}
	r, err := Collect(dir)
	if err != nil {
		t.Fatal(err)
	}
	// m-4 never started so no directory knows of it; m-0.5 is listed as unfinished.
	if r.Cells != 5 || len(r.Rows) != 4 || len(r.Unfinished) != 1 || r.Unfinished[0].Cell != "m-0.5" {
		t.Fatalf("cells %d, rows %d, unfinished %+v", r.Cells, len(r.Rows), r.Unfinished)
	}
	if _, err := Collect(t.TempDir()); err == nil {
		t.Fatal("an empty directory is not a sweep")
	}
}

func TestUnreadableCellIsListedNotDropped(t *testing.T) {
	dir := t.TempDir()
	makeSweep(t, dir, handCells[:2])
	write(t, filepath.Join(dir, "g-4", sweep.ReportFile), []byte("{not json"))
	r, err := Collect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || len(r.Unfinished) != 1 || !strings.HasPrefix(r.Unfinished[0].State, "unreadable: ") {
		t.Fatalf("rows %d, unfinished %+v", len(r.Rows), r.Unfinished)
	}
}

// TestUnmixTableShowsTheRandomRowsFloor: on real stores random rows of the split can score far
// above 1/K (0.60-0.82 on MiniLM layer 3, docs/paper-reproduction.md), so the unmix table must
// print their mass beside the attack's.
func TestUnmixTableShowsTheRandomRowsFloor(t *testing.T) {
	dir := t.TempDir()
	unmix := func(c *config.Run) {
		c.Model.Task = settransformer.TaskUnmix
		c.Model.Slots, c.Model.DecLayers = 8, 1
	}
	final := map[string]map[string]float64{
		"train": {"unmix_mass": 0.61, "unmix_mass_chance": 0.0625, "unmix_mass_se": 0.01, "random_mass": 0.66},
		"val": {"unmix_mass": 0.6430, "unmix_mass_chance": 0.0625, "unmix_mass_se": 0.0101, "random_mass": 0.6658,
			"cos_mean": 0.27, "cos_p95": 0.39, "random_cos_p95": 0.82},
	}
	makeSweep(t, dir, []cell{{name: "m", edit: unmix, final: final}})
	r, err := Collect(dir)
	if err != nil {
		t.Fatal(err)
	}
	md := string(r.Markdown(nil))
	if !strings.Contains(md, "| chance (train / val) | val random mass | val cos mean |") ||
		!strings.Contains(md, "| 0.0625 / 0.0625 | 0.6658 | 0.2700 |") {
		t.Fatalf("unmix table without the random-rows mass beside chance:\n%s", md)
	}
}
