package sweep

import (
	"math"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
)

// The paper's tables, as docs/paper.md gives them; ranges as [min, max, rand].
type paperRange struct {
	min, max float64
	rand     gelo.Randomization
}

func fix(v float64) paperRange       { return paperRange{v, v, gelo.RandNone} }
func logu(lo, hi float64) paperRange { return paperRange{lo, hi, gelo.RandLogUniform} }
func uni(lo, hi float64) paperRange  { return paperRange{lo, hi, gelo.RandUniform} }
func (p paperRange) eq(r gelo.Range) bool {
	return p.min == r.Min && p.max == r.Max && p.rand == r.Rand
}

// R1-R12: shield kind, fraction, scale, randomization; Llama-2 column train / val.
var paperRetrieval = []struct {
	label       string
	kind        gelo.ShieldKind
	frac, scale paperRange
	train, val  float64
}{
	{"R1", "manifold", fix(0.05), fix(1), 0.8318, 0.8212},
	{"R2", "manifold", logu(0.01, 0.14), logu(5, 30), 0.0704, 0.0723},
	{"R3", "manifold", fix(0.05), fix(5), 0.5330, 0.4990},
	{"R4", "gaussian", fix(0.05), logu(2.5, 20), 0.4584, 0.3700},
	{"R5", "gaussian", fix(0.05), fix(10), 0.4749, 0.5010},
	{"R6", "student_t", fix(0.05), fix(10), 0.3115, 0.3042},
	{"R7", "manifold", fix(0.05), logu(2.5, 20), 0.3641, 0.3737},
	{"R8", "gaussian", logu(0.01, 0.09), fix(10), 0.3949, 0.3964},
	{"R9", "gaussian", logu(0.03, 0.09), logu(2.5, 20), 0.4291, 0.3557},
	{"R10", "gaussian", logu(0.01, 0.12), logu(2.5, 25), 0.3236, 0.3316},
	{"R11", "manifold", fix(0.05), fix(10), 0.2238, 0.2251},
	{"R12", "gaussian", fix(0.05), fix(5), 0.7190, 0.6952},
}

// M1-M11: shield (none = fraction 0), positives, tokens per text, obs rows, Sinkhorn eps and
// iterations, OT weight; train / val. Count ranges are uniform, shield ranges log-uniform (the
// paper does not say; the sweep file's header states the choice).
var paperUnmix = []struct {
	label             string
	kind              gelo.ShieldKind
	frac, scale       paperRange
	positives, tokens paperRange
	obs               float64
	eps               float64
	iters             int
	wOT               float64
	train, val        float64
}{
	{"M1", "manifold", logu(0.01, 0.10), logu(1, 20), uni(2, 8), uni(8, 96), 0.96, 5.0, 50, 0.1, 0.0788, 0.0678},
	{"M2", "manifold", logu(0.01, 0.10), logu(1, 20), uni(2, 8), uni(8, 96), 0.80, 5.0, 50, 1, 0.0750, 0.0691},
	{"M3", "gaussian", fix(0.05), fix(5), uni(2, 8), uni(8, 96), 0.96, 5.0, 50, 0.1, 0.0703, 0.0625},
	{"M4", "gaussian", fix(0.05), fix(5), fix(4), fix(64), 0.96, 5.0, 50, 0.1, 0.2800, 0.2712},
	{"M5", "gaussian", fix(0.05), fix(5), fix(4), fix(64), 0.96, 0.1, 30, 1, 0.4181, 0.4144},
	{"M6", "gaussian", fix(0), fix(5), fix(4), fix(64), 1, 5.0, 50, 0.1, 0.4431, 0.4375},
	{"M7", "", fix(0), paperRange{}, uni(32, 64), uni(4, 8), 0.96, 5.0, 50, 0.1, 0.0725, 0.0703},
	{"M8", "", fix(0), paperRange{}, uni(32, 64), uni(4, 8), 0.96, 5.0, 50, 1, 0.0712, 0.0650},
	{"M9", "", fix(0), paperRange{}, uni(16, 32), uni(8, 16), 0.96, 5.0, 50, 0.1, 0.1150, 0.1144},
	{"M10", "", fix(0), paperRange{}, uni(8, 16), uni(16, 32), 0.96, 5.0, 50, 0.1, 0.1494, 0.1544},
	{"M11", "", fix(0), paperRange{}, uni(4, 8), uni(32, 64), 0.96, 5.0, 50, 0.1, 0.2062, 0.2216},
}

func checkRef(t *testing.T, c Cell, label string, train, val float64) {
	t.Helper()
	if c.Label != label || c.Name != label {
		t.Errorf("cell %s: label %q, want %q naming the cell", c.Name, c.Label, label)
	}
	if c.Paper == nil || c.Paper.Train != train || c.Paper.Val != val {
		t.Errorf("cell %s: paper %+v, want train %v val %v", c.Name, c.Paper, train, val)
	}
}

// The shipped paper-retrieval sweep is exactly R1-R12 on the paper's model and optimizer, with
// 4 positives x 16 examples, so that in-batch chance is 4/64.
func TestPaperRetrievalSweepIsTheTable(t *testing.T) {
	sw, err := Load("../configs/sweeps/paper-retrieval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Cells) != len(paperRetrieval) {
		t.Fatalf("%d cells, want %d (R1-R12)", len(sw.Cells), len(paperRetrieval))
	}
	for i, want := range paperRetrieval {
		c := sw.Cells[i]
		checkRef(t, c, want.label, want.train, want.val)
		s, m, tr := c.Config.Sampler, c.Config.Model, c.Config.Train
		if s.ShieldKind != want.kind || !want.frac.eq(s.ShieldFrac) || !want.scale.eq(s.ShieldScale) || s.ShieldRows != 0 {
			t.Errorf("%s: shield %s frac %s scale %s rows %d, want %s %+v %+v", want.label, s.ShieldKind, s.ShieldFrac, s.ShieldScale, s.ShieldRows, want.kind, want.frac, want.scale)
		}
		if !fix(4).eq(s.Positives) || !fix(64).eq(s.TokensPerText) || s.ObsRows != 1 {
			t.Errorf("%s: positives %s tokens %s obs %v, want 4, 64 (chosen), 1", want.label, s.Positives, s.TokensPerText, s.ObsRows)
		}
		if m.Task != "retrieval" || m.Layers != 24 || m.Hidden != 384 || m.Heads != 12 || m.MLPHidden != 1536 {
			t.Errorf("%s: model %+v, want the paper's 24 x h384, 12 heads, MLP 1536", want.label, m)
		}
		if tr.LR != 1e-5 || tr.WeightDecay != 0.02 || tr.BatchSize != 16 {
			t.Errorf("%s: lr %v wd %v batch %d, want 1e-5, 0.02, 16", want.label, tr.LR, tr.WeightDecay, tr.BatchSize)
		}
		// In-batch candidates: every example's positives; chance |P|/|C| = 4/(16 x 4).
		if chance := s.Positives.Min / (float64(tr.BatchSize) * s.Positives.Max); math.Abs(chance-0.0625) > 1e-12 {
			t.Errorf("%s: in-batch chance %v, want 4/64 = 0.0625", want.label, chance)
		}
		if c.Config.Loss.ExtraNegatives != 0 {
			t.Errorf("%s: extra_negatives %d would change the chance level", want.label, c.Config.Loss.ExtraNegatives)
		}
	}
}

// The shipped paper-unmix sweep is exactly M1-M11, pool K = 16.
func TestPaperUnmixSweepIsTheTable(t *testing.T) {
	sw, err := Load("../configs/sweeps/paper-unmix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Cells) != len(paperUnmix) {
		t.Fatalf("%d cells, want %d (M1-M11)", len(sw.Cells), len(paperUnmix))
	}
	for i, want := range paperUnmix {
		c := sw.Cells[i]
		checkRef(t, c, want.label, want.train, want.val)
		s, u := c.Config.Sampler, c.Config.Loss.Unmix
		if !want.frac.eq(s.ShieldFrac) || s.ShieldRows != 0 {
			t.Errorf("%s: shield frac %s rows %d, want %+v", want.label, s.ShieldFrac, s.ShieldRows, want.frac)
		}
		if want.kind != "" && (s.ShieldKind != want.kind || !want.scale.eq(s.ShieldScale)) {
			t.Errorf("%s: shield %s scale %s, want %s %+v", want.label, s.ShieldKind, s.ShieldScale, want.kind, want.scale)
		}
		if !want.positives.eq(s.Positives) || !want.tokens.eq(s.TokensPerText) || s.ObsRows != want.obs {
			t.Errorf("%s: positives %s tokens %s obs %v, want %+v %+v %v", want.label, s.Positives, s.TokensPerText, s.ObsRows, want.positives, want.tokens, want.obs)
		}
		if u.Eps != want.eps || u.Iters != want.iters || u.WOT != want.wOT {
			t.Errorf("%s: eps %v iters %d w_ot %v, want %v %d %v", want.label, u.Eps, u.Iters, u.WOT, want.eps, want.iters, want.wOT)
		}
		m, tr := c.Config.Model, c.Config.Train
		if m.Task != "unmix" || m.Layers != 24 || m.Hidden != 384 || m.Heads != 12 || m.MLPHidden != 1536 {
			t.Errorf("%s: model %+v, want the paper's", want.label, m)
		}
		if tr.LR != 1e-5 || tr.WeightDecay != 0.02 || tr.BatchSize != 16 || c.Config.Eval.PoolK != 16 {
			t.Errorf("%s: lr %v wd %v batch %d pool_k %d, want 1e-5, 0.02, 16, 16", want.label, tr.LR, tr.WeightDecay, tr.BatchSize, c.Config.Eval.PoolK)
		}
	}
}
