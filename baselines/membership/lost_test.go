package membership

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Near-duplicate rows of X (a repeated token whose rows differ by a little more than rounding)
// beside strong shields (scale 30, which set U's rounding floor) leave a direction of U under the
// floor: the rank cut drops it and a row of X then sticks out of the numerical row space by what
// it had along it, more than ResidualBound's 10 u. RowResidualBound counts sigma_{r+1} and holds
// for every row of X. Each U is observed in fp32, bf16 and fp16.
func TestRowResidualBoundCountsDroppedDirections(t *testing.T) {
	const d, n, shields = 48, 12, 4
	rng := rand.New(rand.NewPCG(11, 12))
	broken := 0
	for _, dt := range []struct {
		name string
		u    float64
	}{{"fp32", roundFP32}, {"bf16", roundBF16}, {"fp16", roundFP16}} {
		z := mat.NewDense(n+shields, d, nil) // [X; S]: (n + shields, d)
		for i := 0; i < n+shields; i++ {
			scale := 1.0
			if i >= n {
				scale = 30
			}
			for j := 0; j < d; j++ {
				z.Set(i, j, scale*rng.NormFloat64())
			}
		}
		// Rows 1 and 2 near-duplicates of row 0 (25 u apart, along different directions).
		for _, i := range []int{1, 2} {
			for j := 0; j < d; j++ {
				z.Set(i, j, z.At(0, j)*(1+25*dt.u*rng.NormFloat64()))
			}
		}
		a := haar(rng, n+shields)
		var u mat.Dense
		u.Mul(a, z)
		roundTo(&u, dt.u)
		s, err := New(&u, Options{UnitRoundoff: dt.u, AllObserved: true, RankTol: RankTol(&u, dt.u)})
		if err != nil {
			t.Fatal(err)
		}
		if !(s.Rank() < n+shields && s.SigmaDropped() > 0) {
			t.Fatalf("%s: rank %d of %d rows, sigma dropped %g: the near-duplicates were not cut", dt.name, s.Rank(), n+shields, s.SigmaDropped())
		}
		x := z.Slice(0, n, 0, d).(*mat.Dense)
		sc, err := s.Score(x)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if b := s.RowResidualBound(sc.Energy[i]); !(sc.Residual[i] <= b) {
				t.Errorf("%s row %d: residual %.3g above its bound %.3g (sigma dropped %.3g)", dt.name, i, sc.Residual[i], b, s.SigmaDropped())
			}
			if sc.Residual[i] > s.ResidualBound() {
				broken++
			}
		}
	}
	if broken == 0 {
		t.Fatal("no row of X broke the bound without the dropped directions: the case tests nothing")
	}
}

// haar is an orthogonal (n, n) from the QR of a Gaussian matrix.
func haar(rng *rand.Rand, n int) *mat.Dense {
	g := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	return &q
}

// roundTo rounds every entry to relative precision u (round to nearest on a grid of 2^-p).
func roundTo(m *mat.Dense, u float64) {
	r, c := m.Dims()
	bits := -math.Log2(u) // significand bits after the leading one, plus one
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			v := m.At(i, j)
			if v == 0 {
				continue
			}
			e := math.Floor(math.Log2(math.Abs(v)))
			q := math.Exp2(e - bits + 1)
			m.Set(i, j, math.Round(v/q)*q)
		}
	}
}
