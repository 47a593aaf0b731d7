package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestGramErrorKnownAnswer(t *testing.T) {
	x := mat.NewDense(1, 1, []float64{2})
	y := mat.NewDense(1, 1, []float64{1})
	if g := GramError(x, y); g != 3 {
		t.Fatalf("GramError = %v, want 3", g)
	}
	if g := GramError(y, y); g != 0 {
		t.Fatalf("GramError(y, y) = %v", g)
	}
}

// TestClassicalSignScalePermutation: BSS output that is the truth up to sign, scale and order
// scores |cos| 1 and aligned Gram error 0, while the raw Gram error sees the scales.
func TestClassicalSignScalePermutation(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	truth := randDense(rng, 10, 40)
	perm := rng.Perm(10)
	est := mat.NewDense(10, 40, nil)
	for i, p := range perm {
		s := (0.5 + rng.Float64()) * float64(1-2*rng.IntN(2))
		row := make([]float64, 40)
		for j, v := range truth.RawRowView(p) {
			row[j] = s * v
		}
		est.SetRow(i, row)
	}
	rep, err := Classical(est, truth, randDense(rng, 10, 40))
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Estimate
	for i := range f.Est {
		if f.True[i] != perm[f.Est[i]] {
			t.Fatalf("estimate %d matched to %d, want %d", f.Est[i], f.True[i], perm[f.Est[i]])
		}
	}
	if !near(f.AbsCosP95, 1) || !near(f.AbsCosMean, 1) || f.GramErrAligned > 1e-12 || f.GramErr < 0.05 {
		t.Fatalf("figures %+v", f)
	}
	if b := rep.Baseline; b == nil || b.AbsCosP95 > 0.7 || b.GramErrAligned < 0.5 {
		t.Fatalf("random baseline %+v, want low |cos| and large Gram error", b)
	}
}

func TestClassicalExactCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	truth := randDense(rng, 5, 9)
	f, err := ClassicalScore(truth, truth)
	if err != nil {
		t.Fatal(err)
	}
	if f.GramErr > 1e-15 || !near(f.AbsCosMedian, 1) {
		t.Fatalf("copy: %+v", f)
	}
	if _, err := ClassicalScore(truth, randDense(rng, 5, 8)); err == nil {
		t.Error("width mismatch accepted")
	}
	if math.IsNaN(f.AbsCosP95) {
		t.Error("NaN p95")
	}
}
