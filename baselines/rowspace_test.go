package baselines

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

func TestResidualsKnownAnswer(t *testing.T) {
	u := mat.NewDense(2, 3, []float64{2, 0, 0, 1, 1, 0}) // spans e1, e2
	rs, err := NewRowSpace(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Rank() != 2 {
		t.Fatalf("rank %d, want 2", rs.Rank())
	}
	rows := mat.NewDense(4, 3, []float64{1, 1, 1, 0, 0, 5, 3, 4, 0, 0, 0, 0})
	frac, energy, err := rs.Residuals(rows)
	if err != nil {
		t.Fatal(err)
	}
	// Fractions above 1e-3 come from the float32 coarse pass (~1e-6 absolute); below, exact.
	want := []float64{1.0 / 3, 1, 0, 1}
	for i := range want {
		if math.Abs(frac[i]-want[i]) > 1e-6 || (want[i] == 0 && frac[i] > 1e-30) {
			t.Errorf("row %d: residual %v, want %v", i, frac[i], want[i])
		}
	}
	if energy[2] != 25 {
		t.Errorf("energy %v, want 25", energy[2])
	}
	c, err := rs.Score(rows.Slice(0, 3, 0, 3).(*mat.Dense), Energy)
	if err != nil {
		t.Fatal(err)
	}
	// Energies 3, 25, 25; outside 1 + 25 + 0 = 26 of 53.
	if math.Abs(c.Inside-27.0/53) > 1e-6 || math.Abs(c.Logit-math.Log(27.0/26)) > 1e-5 {
		t.Errorf("energy containment %+v, want inside 27/53", c)
	}
	b, _ := rs.Score(rows, BestRow)
	if b.Inside != 1 || b.Logit < 60 {
		t.Errorf("best-row containment %+v, want exact", b)
	}
}

func TestRowSpaceRankTolerance(t *testing.T) {
	u := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 2, 4, 6, 8, 0, 1, 0, 1}) // row 2 = 2 * row 1
	rs, err := NewRowSpace(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Rank() != 2 {
		t.Fatalf("rank %d, want 2", rs.Rank())
	}
	if _, err := NewRowSpace(mat.NewDense(2, 2, nil), 0); err == nil {
		t.Error("zero U accepted")
	}
	if _, err := NewRowSpace(u, 1.5); err == nil {
		t.Error("tolerance 1.5 accepted")
	}
}

// toyCorpus builds texts of rows sharing a common direction, as real hidden states do, so that
// containment is not trivially decided by norms. corpus[i]: (rows, d).
func toyCorpus(rng *rand.Rand, texts, rows, d int) []*mat.Dense {
	common := make([]float64, d)
	for j := range common {
		common[j] = rng.NormFloat64()
	}
	out := make([]*mat.Dense, texts)
	for i := range out {
		m := mat.NewDense(rows, d, nil)
		for r := 0; r < rows; r++ {
			for j := 0; j < d; j++ {
				m.Set(r, j, 2*common[j]+rng.NormFloat64())
			}
		}
		out[i] = m
	}
	return out
}

// roundBF16 rounds a float32 to bfloat16 (round to nearest even) and back.
func roundBF16(x float32) float32 {
	b := math.Float32bits(x)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// toyExample mixes windows of the source texts with Gaussian shields in float32 and keeps a random
// subset of ceil(obs*n) rows; it returns U_obs (n_obs, d).
func toyExample(rng *rand.Rand, corpus []*mat.Dense, sources []int, window, shields int, obs float64, bf16 bool) *mat.Dense {
	_, d := corpus[0].Dims()
	var x [][]float64
	for _, s := range sources {
		rows, _ := corpus[s].Dims()
		off := rng.IntN(rows - window + 1)
		for r := off; r < off+window; r++ {
			x = append(x, corpus[s].RawRowView(r))
		}
	}
	for k := 0; k < shields; k++ {
		row := make([]float64, d)
		for j := range row {
			row[j] = 3 * rng.NormFloat64()
		}
		x = append(x, row)
	}
	n := len(x)
	// Rows of A are i.i.d., so keeping ceil(obs*n) rows of U is the same as drawing that many.
	nObs := int(math.Ceil(obs * float64(n)))
	u := mat.NewDense(nObs, d, nil)
	for i := 0; i < nObs; i++ {
		a := make([]float32, n) // a kept row of A
		for k := range a {
			a[k] = float32(rng.NormFloat64())
		}
		for j := 0; j < d; j++ {
			var acc float32
			for k := 0; k < n; k++ {
				acc += a[k] * float32(x[k][j])
			}
			if bf16 {
				acc = roundBF16(acc)
			}
			u.Set(i, j, float64(acc))
		}
	}
	return u
}

func TestRowSpaceFindsSourceTexts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const d = 256
	corpus := toyCorpus(rng, 40, 12, d)
	for _, tc := range []struct {
		name string
		obs  float64
		bf16 bool
	}{{"fp32", 1, false}, {"bf16", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			for ex := 0; ex < 5; ex++ {
				sources := rng.Perm(len(corpus))[:3]
				u := toyExample(rng, corpus, sources, 8, 6, tc.obs, tc.bf16)
				for _, agg := range []Aggregate{Energy, BestRow} {
					scores, err := ScoreCandidates(u, corpus, agg, 0)
					if err != nil {
						t.Fatal(err)
					}
					r, err := eval.ScoreRetrieval(Logits(scores), sources)
					if err != nil {
						t.Fatal(err)
					}
					if r.Recall != 1 || r.Top1 != 1 {
						t.Fatalf("%v: recall %v top1 %v, want every source text first", agg, r.Recall, r.Top1)
					}
					// bf16 leaves source residuals near 1e-5 rather than 1e-14: smaller logits.
					if minMass := map[bool]float64{false: 0.999, true: 0.99}[tc.bf16]; agg == BestRow && r.Mass < minMass {
						t.Fatalf("best-row mass %v, want > %v", r.Mass, minMass)
					}
					if agg == BestRow {
						limit := 1e-10
						if tc.bf16 {
							limit = 1e-3
						}
						for _, s := range sources {
							if out := 1 - scores[s].Inside; out > limit {
								t.Errorf("source %d: best residual %v > %v", s, out, limit)
							}
						}
					}
				}
			}
		})
	}
}

// TestPartialObservationDegrades: dropping rows of U leaves the source rows partly outside the
// observed row space, so their residuals jump from round-off to a sizable fraction and the
// positive mass falls.
func TestPartialObservationDegrades(t *testing.T) {
	const d = 256
	mass := map[float64]float64{}
	worst := map[float64]float64{}
	for _, obs := range []float64{1, 0.8, 0.5} {
		rng := rand.New(rand.NewPCG(3, 4))
		corpus := toyCorpus(rng, 40, 12, d)
		var acc eval.RetrievalAccumulator
		var resid []float64
		for ex := 0; ex < 8; ex++ {
			sources := rng.Perm(len(corpus))[:3]
			u := toyExample(rng, corpus, sources, 8, 6, obs, false)
			scores, err := ScoreCandidates(u, corpus, BestRow, 0)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := eval.ScoreRetrieval(Logits(scores), sources)
			acc.AddScore(r)
			for _, s := range sources {
				resid = append(resid, 1-scores[s].Inside)
			}
		}
		mass[obs] = acc.Result().Mass.Mean
		worst[obs] = slices.Min(resid)
	}
	t.Logf("mass by obs_rows: %v; smallest source residual: %v", mass, worst)
	if worst[1] > 1e-10 || worst[0.8] < 1e-3 || worst[0.5] < worst[0.8] {
		t.Errorf("smallest source residuals %v: want round-off at obs 1, large and growing below", worst)
	}
	if !(mass[1] > mass[0.8] && mass[0.8] > mass[0.5]) || mass[1] < 0.999 {
		t.Errorf("mass %v: want ~1 at full observation and falling with obs_rows", mass)
	}
}

// TestRowSpaceAgreesWithSVD: on an ill-conditioned U (cond 1e5) the Gram-based basis is
// orthonormal to round-off and gives the same residuals as the right singular vectors of an SVD.
func TestRowSpaceAgreesWithSVD(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n, d = 20, 120
	u := mat.NewDense(n, d, nil)
	for i := 0; i < n; i++ {
		scale := math.Pow(1e-5, float64(i)/float64(n-1))
		for j := 0; j < d; j++ {
			u.Set(i, j, scale*rng.NormFloat64())
		}
	}
	rs, err := NewRowSpace(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Rank() != n {
		t.Fatalf("rank %d, want %d", rs.Rank(), n)
	}
	var vtv mat.Dense
	vtv.Mul(rs.basis.T(), rs.basis)
	for i := 0; i < n; i++ {
		vtv.Set(i, i, vtv.At(i, i)-1)
	}
	if e := mat.Norm(&vtv, 2); e > 1e-12 {
		t.Errorf("||V^T V - I|| = %v", e)
	}
	var svd mat.SVD
	if !svd.Factorize(u, mat.SVDThinV) {
		t.Fatal("SVD failed")
	}
	var v mat.Dense
	svd.VTo(&v)
	ref := fromBasis(&v)
	probe := mat.NewDense(30, d, nil)
	for i := 0; i < 30; i++ {
		for j := 0; j < d; j++ {
			probe.Set(i, j, rng.NormFloat64())
		}
	}
	// Probe rows 0..9 lie in the row space exactly (combinations of U's rows).
	var inside mat.Dense
	inside.Mul(randDenseT(rng, 10, n), u)
	for i := 0; i < 10; i++ {
		probe.SetRow(i, inside.RawRowView(i))
	}
	got, _, err := rs.Residuals(probe)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := ref.Residuals(probe)
	for i := range got {
		// Contained probes (0..9) go through the exact pass; the others agree to float32 accuracy.
		if tol := map[bool]float64{true: 1e-10, false: 1e-5}[i < 10]; math.Abs(got[i]-want[i]) > tol {
			t.Errorf("probe %d: residual %v, SVD %v", i, got[i], want[i])
		}
		if i < 10 && got[i] > 1e-18 {
			t.Errorf("contained probe %d: residual %v, want round-off (<1e-18)", i, got[i])
		}
	}
}

func randDenseT(rng *rand.Rand, r, c int) *mat.Dense {
	m := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			m.Set(i, j, rng.NormFloat64())
		}
	}
	return m
}
