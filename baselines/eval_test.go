package baselines

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"gonum.org/v1/gonum/mat"
)

// laplaceCorpus returns texts of rows with i.i.d. Laplace entries plus a shared direction of
// weight common (real hidden states share one), rows rows each, width d.
func laplaceCorpus(t *testing.T, texts, rows, d int, common float64) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	dir := make([]float64, d)
	for j := range dir {
		dir[j] = rng.NormFloat64()
	}
	c := data.NewMemCorpus(d, 4)
	for i := 0; i < texts; i++ {
		buf := make([]float32, rows*d)
		for r := 0; r < rows; r++ {
			for j := 0; j < d; j++ {
				v := rng.ExpFloat64()
				if rng.IntN(2) == 0 {
					v = -v
				}
				buf[r*d+j] = float32(v + common*dir[j])
			}
		}
		if err := c.Add(int64(1000+i), buf, []float32{1, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestRowSpaceTable(t *testing.T) {
	c := laplaceCorpus(t, 60, 24, 256, 2)
	cfg := gelo.DefaultConfig()
	cfg.Positives = gelo.Fixed(2)
	cfg.TokensPerText = gelo.Fixed(8)
	cfg.ShieldFrac = gelo.Fixed(0.25)
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := RowSpaceTable(context.Background(), s, []float64{1, 0.5}, nil,
		RowSpaceOptions{Split: data.Train, Examples: 6, Batch: 3, ExtraNegatives: 4, Aggregate: BestRow})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 2 obs_rows x 2 dtypes", len(rows))
	}
	cell := map[[2]any]RowSpaceRow{}
	for _, r := range rows {
		t.Logf("obs %v %s: mass %v top1 %v recall %v, |C| %.1f, source residual %.2g",
			r.ObsRows, r.ObserveDtype, r.Mass, r.Top1, r.Recall, r.Candidates, r.SourceResidual)
		cell[[2]any{r.ObsRows, r.ObserveDtype}] = r
		if r.Mass.N != 6 || r.Candidates != 10 || math.Abs(r.Mass.Chance-0.2) > 1e-12 {
			t.Errorf("cell %+v: want 6 examples, 10 candidates (6 positives + 4 extra), chance 2/10", r)
		}
	}
	full, bf16 := cell[[2]any{1.0, gelo.ObserveNone}], cell[[2]any{1.0, gelo.ObserveBF16}]
	half := cell[[2]any{0.5, gelo.ObserveNone}]
	if full.Top1.Mean != 1 || full.Recall.Mean != 1 || full.Mass.Mean < 0.999 || full.SourceResidual > 1e-10 {
		t.Errorf("fp32, all rows observed: %+v; want exact retrieval", full)
	}
	if bf16.Recall.Mean != 1 || bf16.SourceResidual < 1e-9 || bf16.SourceResidual > 1e-3 {
		t.Errorf("bf16: %+v; want exact retrieval with residuals near bf16 round-off", bf16)
	}
	if half.Mass.Mean >= full.Mass.Mean || half.SourceResidual < 1e-3 {
		t.Errorf("half observed: %+v; want lower mass and sizable residuals", half)
	}
}

func TestShieldTable(t *testing.T) {
	c := laplaceCorpus(t, 40, 16, 2048, 0)
	s, err := gelo.NewSampler(c, gelo.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ShieldTable(context.Background(), s, ShieldTableOptions{
		BSS: BSSOptions{Split: data.Train, Examples: 2, Seed: 3}, N: 16, Positives: 2, ShieldRows: 4, Scales: []float64{0, 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 2 methods x 2 scales", len(rows))
	}
	for _, r := range rows {
		t.Logf("%s scale %v: n %.0f (clean %.0f) p95 %v mean %v converged %d/2, %.2fs",
			r.Method, r.ShieldScale, r.N, r.NClean, r.P95AbsCos, r.MeanAbsCos, r.Converged, r.Seconds)
		if r.N != 16 || (r.ShieldScale == 0) != (r.NClean == 16) {
			t.Errorf("%s scale %v: n %v, n_clean %v", r.Method, r.ShieldScale, r.N, r.NClean)
		}
		if r.P95AbsCos.Chance > 0.3 || math.IsNaN(r.P95AbsCos.Chance) {
			t.Errorf("%s: chance p95 %v, want the low figure of unrelated rows", r.Method, r.P95AbsCos.Chance)
		}
		// Independent Laplace rows stay identifiable next to Gaussian shields: ICA ignores scale.
		if r.P95AbsCos.Mean < 0.95 || r.MeanAbsCos.Mean < 0.9 {
			t.Errorf("%s scale %v: p95 %v mean %v, want Laplace rows recovered", r.Method, r.ShieldScale, r.P95AbsCos, r.MeanAbsCos)
		}
	}
}

func TestAnchorEval(t *testing.T) {
	c := laplaceCorpus(t, 40, 16, 2048, 0)
	cfg := gelo.DefaultConfig()
	cfg.Positives = gelo.Fixed(2)
	cfg.TokensPerText = gelo.Fixed(8)
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []AnchorMethod{Subtract, Project, Constrained} {
		r, err := AnchorEval(context.Background(), s, AnchorEvalOptions{
			Split: data.Train, Examples: 2, Anchors: 4, Anchor: AnchorOptions{Method: m, ICA: FastICAOptions{Seed: 1}}, Seed: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: n %.0f, mixing error %.3f, p95 %v, mean %v", r.Method, r.N, r.MixingErr, r.P95AbsCos, r.MeanAbsCos)
		// 16 clean rows + 2 Gaussian shields; the other rows' correlation with the anchors over
		// 2048 samples puts the floor of the mixing error near sqrt(14/2048) = 0.08.
		if r.MixingErr > 0.2 || r.P95AbsCos.Mean < 0.95 || r.P95AbsCos.Chance > 0.3 {
			t.Errorf("%s: %+v", r.Method, r)
		}
	}
}

// oracleMethod returns a BSS method that "recovers" each example's clean rows H exactly, times
// scale: it reads them from the sampler (examples 0, 1, ... of split, in BSSEval's order).
func oracleMethod(s *gelo.Sampler, split data.Split, scale float64) BSSMethod {
	next := int64(0)
	return BSSMethod{Name: "oracle", Run: func(_ context.Context, _ *mat.Dense) (Separation, error) {
		ex, err := s.Example(split, next)
		if err != nil {
			return Separation{}, err
		}
		next++
		h := mat.NewDense(ex.NClean, ex.D, nil)
		for i := range ex.NClean {
			for j := range ex.D {
				h.Set(i, j, scale*float64(ex.H[i*ex.D+j]))
			}
		}
		return Separation{Sources: h, Converged: true}, nil
	}}
}

// TestBSSEvalReportsGramError: the Gram error of SPEC §6 reaches the BSS results and their table.
// Exact recovery scores |cos| 1 and Gram error 0; rows recovered at twice their scale score Gram
// error exactly 3 (||4G - G|| / ||G||) and 0 after the per-row rescaling; random rows of the
// split sit beside both, and the table names and explains that column.
func TestBSSEvalReportsGramError(t *testing.T) {
	c := laplaceCorpus(t, 40, 16, 64, 0)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.TokensPerText = gelo.Fixed(2), gelo.Fixed(8)
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scale, gram float64
		cell        string
	}{{1, 0, "| 0.0000 ± 0.0000 "}, {2, 3, "| 3.0000 ± 0.0000 "}} {
		row, err := BSSEval(context.Background(), s, oracleMethod(s, data.Train, tc.scale), BSSOptions{Split: data.Train, Examples: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(row.P95AbsCos.Mean-1) > 1e-12 || math.Abs(row.GramErr.Mean-tc.gram) > 1e-9 ||
			row.GramErr.N != 2 || row.GramErrAligned.Mean > 1e-9 {
			t.Errorf("scale %v: p95 %v, Gram error %v, aligned %v; want |cos| 1, Gram error %v, aligned 0",
				tc.scale, row.P95AbsCos, row.GramErr, row.GramErrAligned, tc.gram)
		}
		if ch := row.GramErr.Chance; !(ch > 0.1) || row.GramErrAligned.Chance < 0.1 {
			t.Errorf("scale %v: random rows' Gram errors %v and %v, want those of unrelated rows", tc.scale, ch, row.GramErrAligned.Chance)
		}
		if row.RandomRows != row.NClean {
			t.Errorf("scale %v: %v random rows drawn per example, want as many as the estimates, %v", tc.scale, row.RandomRows, row.NClean)
		}
		tab := row.Table()
		t.Logf("scale %v:\n%s", tc.scale, tab)
		for _, want := range []string{"| random rows (" + fmt.Sprint(row.RandomRows) + " draws per example",
			"random rows: the figure a random guess of rows reaches", "above it = recovery"} {
			if !strings.Contains(tab, want) {
				t.Errorf("scale %v: table lacks %q:\n%s", tc.scale, want, tab)
			}
		}
		gramLine := ""
		for _, l := range strings.Split(tab, "\n") {
			if strings.HasPrefix(l, "| Gram error ") && !strings.Contains(l, "rescaled") {
				gramLine = l
			}
		}
		if !strings.Contains(gramLine, tc.cell) || !strings.Contains(gramLine, fmt.Sprintf("| %.4f ", row.GramErr.Chance)) {
			t.Errorf("scale %v: Gram error line %q, want the figure %q beside the random rows' %.4f", tc.scale, gramLine, tc.cell, row.GramErr.Chance)
		}
	}
}

// TestRandomRowsFollowThePoolRule: the classical tables' random rows are splitpool's: distinct rows
// of texts of the split other than the example's, centred by the example's own mean, and the same
// seeds give the same rows.
func TestRandomRowsFollowThePoolRule(t *testing.T) {
	const d = 8
	c := laplaceCorpus(t, 30, 6, d, 2)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.TokensPerText, cfg.ShieldRows, cfg.Center, cfg.ValFrac = gelo.Fixed(2), gelo.Fixed(4), 0, true, 0.4
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := s.Example(data.Val, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ex.CenterMean == nil {
		t.Fatal("the sampler did not centre")
	}
	var acc classicalAcc
	rows, err := acc.randomRows(s, data.Val, ex, 20, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	// source finds the text and row that drawn row r is (a corpus row minus the centring mean, in
	// float32 as the sampler centres).
	source := func(r int) (int, int) {
		buf := make([]float32, d)
		for _, ti := range s.Texts(data.Val) {
			for k := 0; k < c.NumTokens(ti); k++ {
				if err := c.Rows(ti, k, 1, buf); err != nil {
					t.Fatal(err)
				}
				same := true
				for j, v := range buf {
					same = same && float64(v-ex.CenterMean[j]) == rows.At(r, j)
				}
				if same {
					return ti, k
				}
			}
		}
		return -1, -1
	}
	seen := map[[2]int]bool{}
	for r := 0; r < 20; r++ {
		ti, k := source(r)
		if ti < 0 {
			t.Fatalf("random row %d is no centred row of the split", r)
		}
		if slices.Contains(ex.PositiveIdx, ti) {
			t.Fatalf("random row %d comes from the example's own text %d", r, ti)
		}
		if seen[[2]int{ti, k}] {
			t.Fatalf("random row %d repeats row %d of text %d", r, k, ti)
		}
		seen[[2]int{ti, k}] = true
	}
	var again classicalAcc
	if rows2, err := again.randomRows(s, data.Val, ex, 20, 4, 5); err != nil || !mat.Equal(rows, rows2) {
		t.Errorf("the same seeds drew other rows (%v)", err)
	}
}
