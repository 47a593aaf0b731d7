package report

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/sweep"
)

// The MiniLM twin's figures of docs/paper-reproduction.md (val mass, its SE, train mass; the
// paper's train and val), whose ratios, pairs and distances that page states, computed there
// independently of this code.
var twinRetrieval = []struct {
	label                                string
	val, se, train, paperTrain, paperVal float64
}{
	{"R1", 0.2837, 0.0149, 0.2853, 0.8318, 0.8212},
	{"R2", 0.0679, 0.0011, 0.0672, 0.0704, 0.0723},
	{"R3", 0.0952, 0.0038, 0.0910, 0.5330, 0.4990},
	{"R4", 0.1044, 0.0042, 0.1019, 0.4584, 0.3700},
	{"R5", 0.1045, 0.0048, 0.1041, 0.4749, 0.5010},
	{"R6", 0.0937, 0.0036, 0.0915, 0.3115, 0.3042},
	{"R7", 0.0775, 0.0023, 0.0733, 0.3641, 0.3737},
	{"R8", 0.0970, 0.0048, 0.0929, 0.3949, 0.3964},
	{"R9", 0.1010, 0.0043, 0.0999, 0.4291, 0.3557},
	{"R10", 0.0974, 0.0050, 0.0918, 0.3236, 0.3316},
	{"R11", 0.0697, 0.0012, 0.0665, 0.2238, 0.2251},
	{"R12", 0.1352, 0.0078, 0.1406, 0.7190, 0.6952},
}

var twinUnmix = []struct {
	label                            string
	val, se, random, randomSE, paper float64
}{
	{"M3", 0.6180, 0.0085, 0.6658, 0.0192, 0.0625},
	{"M5", 0.6476, 0.0103, 0.6007, 0.0135, 0.4144},
	{"M7", 0.7192, 0.0077, 0.8232, 0.0108, 0.0703},
}

func twinReport() *Report {
	r := &Report{Sweep: "twin"}
	for _, t := range twinRetrieval {
		r.Rows = append(r.Rows, Row{Cell: t.label, Label: t.label, Task: "retrieval",
			Paper: &sweep.Reference{Train: t.paperTrain, Val: t.paperVal},
			Final: map[string]map[string]float64{
				"train": {"pos_mass": t.train, "pos_mass_chance": 0.0625},
				"val":   {"pos_mass": t.val, "pos_mass_se": t.se, "pos_mass_chance": 0.0638},
			}})
	}
	// A cell without the paper's figures takes no part.
	r.Rows = append(r.Rows, Row{Cell: "extra", Task: "retrieval", Final: map[string]map[string]float64{"val": {"pos_mass": 0.9}}})
	for _, t := range twinUnmix {
		r.Rows = append(r.Rows, Row{Cell: t.label, Label: t.label, Task: "unmix",
			Paper: &sweep.Reference{Train: t.paper, Val: t.paper},
			Final: map[string]map[string]float64{
				"val": {"unmix_mass": t.val, "unmix_mass_se": t.se, "unmix_mass_chance": 0.0625,
					"random_mass": t.random, "random_mass_se": t.randomSE},
			}})
	}
	r.Cells = len(r.Rows)
	return r
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestCompareCountsThePairsOrderedAgainstThePaper(t *testing.T) {
	cs := twinReport().Compare()
	if len(cs) != 2 || cs[0].Task != "retrieval" || cs[1].Task != "unmix" {
		t.Fatalf("%d comparisons, want retrieval and unmix", len(cs))
	}
	c := cs[0]
	if len(c.Cells) != 12 || c.Pairs != 66 || c.Ties != 0 || len(c.Inversions) != 11 {
		t.Fatalf("%d cells, %d pairs, %d ties, %d inversions; want 12, 66, 0, 11", len(c.Cells), c.Pairs, c.Ties, len(c.Inversions))
	}
	var top []string
	for _, in := range c.Inversions[:4] {
		top = append(top, in.A.Name+">"+in.B.Name)
	}
	if !slices.Equal(top, []string{"R4>R7", "R9>R7", "R6>R7", "R10>R7"}) {
		t.Errorf("widest inversions %v, want R7 below R4, R9, R6, R10", top)
	}
	for k, want := range []float64{5.62, 4.82, 3.79, 3.62} {
		if d := c.Inversions[k].Distance; !near(d, want, 0.005) {
			t.Errorf("inversion %d: distance %.4f, want %.2f", k, d, want)
		}
	}
	if d := c.Inversions[4].Distance; !near(d, 1.62, 0.005) {
		t.Errorf("fifth inversion (R3 vs R4): %.4f, want 1.62", d)
	}
	// No ties: Spearman is 1 − 6 Σd² / (n (n² − 1)) with Σd² = 64.
	if !near(c.Spearman, 1-6*64.0/(12*143), 1e-12) || !near(c.Pearson, 0.8195, 5e-5) {
		t.Errorf("Spearman %.6f, Pearson %.6f", c.Spearman, c.Pearson)
	}
	for _, w := range []struct {
		name     string
		val, trn float64
	}{{"R1", 0.290, 0.290}, {"R4", 0.132, 0.100}, {"R8", 0.099, 0.091}, {"R11", 0.036, 0.025}} {
		i := slices.IndexFunc(c.Cells, func(p Paired) bool { return p.Name == w.name })
		if r, tr := c.Cells[i].Ratio(PaperChance), c.Cells[i].TrainRatio(PaperChance); !near(r, w.val, 0.0005) || !near(tr, w.trn, 0.0005) {
			t.Errorf("%s: ratio %.4f (train %.4f), want %.3f (%.3f)", w.name, r, tr, w.val, w.trn)
		}
	}

	md := string(PaperMarkdown(cs, PaperChance))
	for _, want := range []string{
		"Of the 66 pairs of cells, 11 are ordered by val mass against the paper and 0 are tied; Spearman 0.78, Pearson 0.82.",
		"| R4 | +0.0406 | +0.3075 | 13.2% | 11.8%–14.6% | 10.0% |",
		"| R4 vs R7 | 0.1044 vs 0.0775 | +0.0269 | 5.6 SE | 0.3700 vs 0.3737 | -0.0037 |",
		"| M7 | 0.7192 ± 0.0077 | 0.8232 ± 0.0108 | -0.1040 | -7.8 SE |",
		"| M5 | 0.6476 ± 0.0103 | 0.6007 ± 0.0135 | +0.0469 | +2.8 SE |",
		"| M3 | 0.6180 ± 0.0085 | 0.6658 ± 0.0192 | -0.0478 | -2.3 SE |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The paper at chance (M3's 0.0625) has no ratio.
	if !strings.Contains(md, "| M3 | +0.5555 | +0.0000 | - | - | - |") {
		t.Errorf("M3's ratio should be absent:\n%s", md)
	}
}

func TestRanksAverageTies(t *testing.T) {
	if got := ranks([]float64{3, 1, 2, 2}); !slices.Equal(got, []float64{4, 1, 2.5, 2.5}) {
		t.Fatalf("ranks %v", got)
	}
}
