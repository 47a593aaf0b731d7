package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/internal/sample"
)

func randDense(rng *rand.Rand, r, c int) *mat.Dense {
	m := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			m.Set(i, j, rng.NormFloat64())
		}
	}
	return m
}

// poolDraw is a DrawFunc of distinct rows of pool from a PCG stream seeded by seed, the way the
// tasks draw from a split's row pool (data/splitpool), over a plain matrix.
func poolDraw(pool *mat.Dense, seed uint64) DrawFunc {
	rng := rand.New(rand.NewPCG(seed, 0x756e6d6978))
	return func(_ int, dst *mat.Dense) error {
		k, _ := dst.Dims()
		n, _ := pool.Dims()
		if k > n {
			return fmt.Errorf("%d distractors wanted from a pool of %d rows", k, n)
		}
		for i, r := range sample.Distinct(rng, n, k) {
			dst.SetRow(i, pool.RawRowView(r))
		}
		return nil
	}
}

// randomRows is k distinct rows of pool from a PCG stream seeded by seed: a random-rows prediction.
func randomRows(pool *mat.Dense, k int, seed uint64) (*mat.Dense, error) {
	n, d := pool.Dims()
	if k > n {
		return nil, fmt.Errorf("%d random rows wanted from a pool of %d", k, n)
	}
	out := mat.NewDense(k, d, nil)
	for i, r := range sample.Distinct(rand.New(rand.NewPCG(seed, 0x72616e646f6d)), n, k) {
		out.SetRow(i, pool.RawRowView(r))
	}
	return out, nil
}

// fixedDraw returns a DrawFunc whose distractors depend only on the target, so results cannot
// depend on the order in which predictions are scored.
func fixedDraw(pool *mat.Dense) DrawFunc {
	return func(target int, dst *mat.Dense) error {
		k, _ := dst.Dims()
		n, _ := pool.Dims()
		for i := 0; i < k; i++ {
			dst.SetRow(i, pool.RawRowView((target*7+i)%n))
		}
		return nil
	}
}

func TestUnmixKnownAnswer(t *testing.T) {
	clean := mat.NewDense(1, 2, []float64{1, 0})
	pred := mat.NewDense(1, 2, []float64{2, 0}) // cos 1 with the target
	pool := mat.NewDense(1, 2, []float64{0, 5}) // cos 0 with the prediction
	f, err := UnmixMass(pred, clean, UnmixConfig{K: 2, Tau: 1, Draw: poolDraw(pool, 1)})
	if err != nil {
		t.Fatal(err)
	}
	want := math.E / (math.E + 1)
	if len(f.Pairs) != 1 || !near(f.Mass, want) || f.Chance != 0.5 || f.CosMean != 1 {
		t.Fatalf("got %+v, want mass %v chance 0.5 cos 1", f, want)
	}
}

func TestUnmixCountsBitIdenticalDistractors(t *testing.T) {
	negZero := math.Copysign(0, -1)
	clean := mat.NewDense(1, 2, []float64{1, 0})
	pred := mat.NewDense(1, 2, []float64{1, 0})
	// Pool: an exact duplicate of the target, a -0 variant (not bit-identical) and an orthogonal row.
	pool := mat.NewDense(3, 2, []float64{1, 0, 1, negZero, 0, 1})
	f, err := UnmixMass(pred, clean, UnmixConfig{K: 4, Tau: 1, Draw: fixedDraw(pool)})
	if err != nil {
		t.Fatal(err)
	}
	// Pool logits: target 1, duplicate 1, -0 variant 1, orthogonal 0.
	want := 2 * math.E / (3*math.E + 1)
	if !near(f.Mass, want) || f.Chance != 0.5 {
		t.Fatalf("mass %v chance %v, want %v and 2/4", f.Mass, f.Chance, want)
	}
}

func TestUnmixPerfectPredictionMatchesPermutation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	clean := randDense(rng, 20, 64)
	perm := rng.Perm(20)
	pred := mat.NewDense(20, 64, nil)
	for i, p := range perm {
		row := make([]float64, 64)
		for j, v := range clean.RawRowView(p) {
			row[j] = 3 * v // scale does not change cosines
		}
		pred.SetRow(i, row)
	}
	f, err := UnmixMass(pred, clean, UnmixConfig{Draw: poolDraw(randDense(rng, 500, 64), 2)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Pairs {
		if p.Clean != perm[p.Pred] {
			t.Fatalf("prediction %d matched to %d, want %d", p.Pred, p.Clean, perm[p.Pred])
		}
	}
	if !near(f.CosMean, 1) || !near(f.CosP95, 1) || f.Mass < 0.99 || !near(f.Chance, 1.0/16) {
		t.Fatalf("perfect prediction: %+v", f)
	}
}

func TestUnmixInvariantToPredictionOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	clean := randDense(rng, 12, 16)
	pred := randDense(rng, 9, 16)
	pool := randDense(rng, 100, 16)
	a, err := UnmixMass(pred, clean, UnmixConfig{K: 8, Draw: fixedDraw(pool)})
	if err != nil {
		t.Fatal(err)
	}
	perm := rng.Perm(9)
	shuffled := mat.NewDense(9, 16, nil)
	for i, p := range perm {
		shuffled.SetRow(i, pred.RawRowView(p))
	}
	b, err := UnmixMass(shuffled, clean, UnmixConfig{K: 8, Draw: fixedDraw(pool)})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pairs) != 9 || len(b.Pairs) != 9 || !near(a.Mass, b.Mass) || !near(a.CosMean, b.CosMean) || !near(a.CosP95, b.CosP95) {
		t.Fatalf("order changed figures: %+v vs %+v", a, b)
	}
}

// TestUnmatchedRandomRowSitsAtChance: with one prediction and one clean row there is no matching
// to exploit, so a prediction drawn like the distractors is exchangeable with them and its mass
// must sit at the computed chance level.
func TestUnmatchedRandomRowSitsAtChance(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	pool := randDense(rng, 2000, 32)
	var acc UnmixAccumulator
	for ex := 0; ex < 3000; ex++ {
		rep, err := Unmix(randDense(rng, 1, 32), randDense(rng, 1, 32), nil, UnmixConfig{Draw: poolDraw(pool, uint64(ex))})
		if err != nil {
			t.Fatal(err)
		}
		acc.Add(rep)
	}
	s := acc.Result()
	if math.Abs(s.Mass.Mean-s.Mass.Chance) > 4*s.Mass.StdErr || !near(s.Mass.Chance, 1.0/16) {
		t.Errorf("random prediction: %v, want 1/16 within 4 SE", s.Mass)
	}
	if !math.IsNaN(s.RandomCosMean) || s.RandomMass.N != 0 {
		t.Errorf("no random rows given, yet random figures %+v", s)
	}
}

// TestNoisyCopiesBeatRandomRows: Hungarian matching lifts random rows above 1/K (the matching picks
// each target's most similar random row), which is why they are reported; predictions that carry
// the targets must still beat them by far.
func TestNoisyCopiesBeatRandomRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	pool := randDense(rng, 2000, 32)
	var acc UnmixAccumulator
	for ex := 0; ex < 40; ex++ {
		clean := randDense(rng, 16, 32)
		noisy := mat.NewDense(16, 32, nil)
		noisy.Add(clean, randDense(rng, 16, 32))
		random, err := randomRows(pool, 16, uint64(ex))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Unmix(noisy, clean, random, UnmixConfig{Draw: poolDraw(pool, uint64(ex))})
		if err != nil {
			t.Fatal(err)
		}
		acc.Add(rep)
	}
	s := acc.Result()
	if s.RandomMass.Mean < s.RandomMass.Chance {
		t.Errorf("matched random rows %v below chance", s.RandomMass)
	}
	if s.Mass.Mean < s.RandomMass.Mean+0.3 || s.CosMean < 0.6 || s.RandomCosMean > 0.4 || s.CosP95 < s.CosMean {
		t.Errorf("noisy copies vs random rows: %+v", s)
	}
}

func TestUnmixRectangular(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	pool := randDense(rng, 50, 8)
	for _, tc := range []struct{ s, n int }{{3, 7}, {7, 3}} {
		f, err := UnmixMass(randDense(rng, tc.s, 8), randDense(rng, tc.n, 8), UnmixConfig{K: 4, Draw: poolDraw(pool, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Pairs) != min(tc.s, tc.n) {
			t.Errorf("S=%d n=%d: %d pairs", tc.s, tc.n, len(f.Pairs))
		}
	}
}

func TestUnmixRejectsBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	pool := randDense(rng, 5, 4)
	pred, clean := randDense(rng, 2, 4), randDense(rng, 2, 4)
	if _, err := UnmixMass(pred, randDense(rng, 2, 5), UnmixConfig{Draw: poolDraw(pool, 1)}); err == nil {
		t.Error("width mismatch accepted")
	}
	if _, err := UnmixMass(pred, clean, UnmixConfig{}); err == nil {
		t.Error("missing DrawFunc accepted")
	}
	if _, err := UnmixMass(pred, clean, UnmixConfig{K: 16, Draw: poolDraw(pool, 1)}); err == nil {
		t.Error("pool smaller than K-1 accepted")
	}
	bad := mat.DenseCopyOf(pred)
	bad.Set(1, 1, math.NaN())
	if _, err := UnmixMass(bad, clean, UnmixConfig{K: 2, Draw: poolDraw(pool, 1)}); err == nil {
		t.Error("NaN prediction accepted")
	}
}
