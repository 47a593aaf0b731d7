package baselines

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// refineOracle is the float64 residual fraction of one row, ||r - Q Q^T r||^2 / ||r||^2, formed
// as Residuals formed it before it kept a row's fraction for the row's repeats.
func refineOracle(s *RowSpace, row []float64) float64 {
	e := 0.0
	for _, x := range row {
		e += x * x
	}
	r, d := s.Rank(), s.Dim()
	coef, back := mat.NewVecDense(r, nil), mat.NewVecDense(d, nil)
	coef.MulVec(s.basis.T(), mat.NewVecDense(d, row))
	back.MulVec(s.basis, coef)
	res := 0.0
	for j, x := range row {
		diff := x - back.AtVec(j)
		res += diff * diff
	}
	return min(1, res/e)
}

// TestPreparedResidualsAreResiduals: rows prepared once give, against two row spaces, the bits of
// Residuals on the same rows; contained rows, repeated bit for bit (as a decoder's rows of a
// shared prefix are), get the explicit float64 fraction of each row, repeats included.
func TestPreparedResidualsAreResiduals(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 40))
	const n, d = 6, 20
	var spaces []*RowSpace
	var us []*mat.Dense
	for range 2 {
		u := mat.NewDense(n, d, nil) // (n, d)
		for i := range u.RawMatrix().Data {
			u.RawMatrix().Data[i] = rng.NormFloat64()
		}
		rs, err := NewRowSpace(u, 0)
		if err != nil {
			t.Fatal(err)
		}
		spaces, us = append(spaces, rs), append(us, u)
	}
	// rows: combinations of U_0's rows (contained in space 0), each twice, and random rows.
	const t0 = 12
	rows := mat.NewDense(t0, d, nil) // (t0, d)
	for i := 0; i < t0; i += 3 {
		for j := range d {
			v := 0.0
			for k := range n {
				v += float64(i+k+1) * 0.1 * us[0].At(k, j)
			}
			rows.Set(i, j, v)
			rows.Set(i+1, j, v)
			rows.Set(i+2, j, rng.NormFloat64())
		}
	}
	p, err := PrepareRows(rows)
	if err != nil {
		t.Fatal(err)
	}
	for si, rs := range spaces {
		want, wantE, err := rs.Residuals(rows)
		if err != nil {
			t.Fatal(err)
		}
		got, gotE, err := rs.ResidualsPrepared(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) || gotE[i] != wantE[i] {
				t.Errorf("space %d row %d: prepared %v (energy %v), Residuals %v (%v)", si, i, got[i], gotE[i], want[i], wantE[i])
			}
			if got[i] < refineBelow {
				if o := refineOracle(rs, rows.RawRowView(i)); got[i] != o {
					t.Errorf("space %d row %d: refined fraction %v, the row's own %v", si, i, got[i], o)
				}
			}
		}
		for i := 0; i < t0; i += 3 {
			if si == 0 && (got[i] > 1e-20 || got[i+1] != got[i]) {
				t.Errorf("row %d and its repeat, in U_0's row space: %v, %v, want equal and below 1e-20", i, got[i], got[i+1])
			}
			if got[i+2] < 0.05 {
				t.Errorf("random row %d: residual %v, want most of its energy outside a %d-dim space of R^%d", i+2, got[i+2], n, d)
			}
		}
	}
	rows.Set(3, 4, math.NaN())
	if _, err := PrepareRows(rows); err == nil {
		t.Error("a NaN row prepared")
	}
}

// TestPrepareRows32IsItsWidening: float32 rows prepared without a float64 copy give the residuals
// and energies of their float64 widening, bit for bit, refined rows included.
func TestPrepareRows32IsItsWidening(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 40))
	const n, d, t0 = 5, 16, 10
	u := mat.NewDense(n, d, nil) // (n, d)
	for i := range u.RawMatrix().Data {
		u.RawMatrix().Data[i] = float64(float32(rng.NormFloat64()))
	}
	rs, err := NewRowSpace(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, t0*d) // (t0, d): U's rows themselves (contained), then random rows
	for i := range t0 {
		for j := range d {
			if i < n {
				x[i*d+j] = float32(u.At(i, j))
			} else {
				x[i*d+j] = float32(rng.NormFloat64())
			}
		}
	}
	wide := mat.NewDense(t0, d, nil)
	for i, v := range x {
		wide.RawMatrix().Data[i] = float64(v)
	}
	want, wantE, err := rs.Residuals(wide)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PrepareRows32(x, t0, d)
	if err != nil {
		t.Fatal(err)
	}
	got, gotE, err := rs.ResidualsPrepared(p)
	if err != nil {
		t.Fatal(err)
	}
	refined := 0
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) || gotE[i] != wantE[i] {
			t.Errorf("row %d: float32-prepared %v (energy %v), widened %v (%v)", i, got[i], gotE[i], want[i], wantE[i])
		}
		if want[i] < refineBelow {
			refined++
		}
	}
	if refined < n {
		t.Errorf("%d rows refined, want U's %d rows at least: the test does not reach the float64 refinement", refined, n)
	}
	if !mat.Equal(p.Rows(), wide) {
		t.Error("Rows of float32-prepared rows differ from their widening")
	}
	if _, err := PrepareRows32(x[:d+1], 1, d); err == nil {
		t.Error("a row of d+1 values accepted")
	}
}
