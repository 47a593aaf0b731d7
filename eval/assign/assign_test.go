package assign

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// bruteForce returns the least total over all injective maps from the shorter side to the longer.
func bruteForce(c *mat.Dense) float64 {
	n, m := c.Dims()
	if n > m {
		var t mat.Dense
		t.CloneFrom(c.T())
		return bruteForce(&t)
	}
	best := math.Inf(1)
	used := make([]bool, m)
	var rec func(i int, sum float64)
	rec = func(i int, sum float64) {
		if i == n {
			best = min(best, sum)
			return
		}
		for j := 0; j < m; j++ {
			if !used[j] {
				used[j] = true
				rec(i+1, sum+c.At(i, j))
				used[j] = false
			}
		}
	}
	rec(0, 0)
	return best
}

// checkValid verifies that r is a consistent one-to-one assignment of the right size whose Total
// is the sum of its entries.
func checkValid(t *testing.T, c *mat.Dense, r Result) {
	t.Helper()
	n, m := c.Dims()
	if len(r.RowToCol) != n || len(r.ColToRow) != m {
		t.Fatalf("lengths %d, %d; want %d, %d", len(r.RowToCol), len(r.ColToRow), n, m)
	}
	count, sum := 0, 0.0
	for i, j := range r.RowToCol {
		if j < 0 {
			continue
		}
		if r.ColToRow[j] != i {
			t.Fatalf("RowToCol[%d]=%d but ColToRow[%d]=%d", i, j, j, r.ColToRow[j])
		}
		count++
		sum += c.At(i, j)
	}
	for j, i := range r.ColToRow {
		if i >= 0 && r.RowToCol[i] != j {
			t.Fatalf("ColToRow[%d]=%d but RowToCol[%d]=%d", j, i, i, r.RowToCol[i])
		}
	}
	if count != min(n, m) {
		t.Fatalf("%d pairs assigned, want %d", count, min(n, m))
	}
	if math.Abs(sum-r.Total) > 1e-9*(1+math.Abs(sum)) {
		t.Fatalf("Total %v, sum of assigned entries %v", r.Total, sum)
	}
}

func TestKnownAnswers(t *testing.T) {
	tests := []struct {
		name  string
		rows  int
		data  []float64
		total float64
		cols  []int
	}{
		{"3x3", 3, []float64{4, 1, 3, 2, 0, 5, 3, 2, 2}, 5, []int{1, 0, 2}},
		{"identity is worst", 3, []float64{9, 1, 1, 1, 9, 1, 1, 1, 9}, 3, nil},
		{"wide", 2, []float64{5, 1, 7, 2, 8, 1}, 2, []int{1, 2}},
		{"tall", 3, []float64{5, 2, 1, 8, 7, 1}, 2, nil},
		{"negative", 2, []float64{-3, -1, -2, -5}, -8, []int{0, 1}},
		{"1x1", 1, []float64{-7.5}, -7.5, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mat.NewDense(tc.rows, len(tc.data)/tc.rows, tc.data)
			r, err := Minimize(c)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, c, r)
			if r.Total != tc.total {
				t.Errorf("total %v, want %v", r.Total, tc.total)
			}
			if tc.cols != nil {
				for i, j := range tc.cols {
					if r.RowToCol[i] != j {
						t.Errorf("row %d -> %d, want %d (all: %v)", i, r.RowToCol[i], j, r.RowToCol)
					}
				}
			}
		})
	}
}

func TestTallLeavesRowsOut(t *testing.T) {
	c := mat.NewDense(3, 1, []float64{4, -1, 2})
	r, err := Minimize(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{-1, 0, -1}
	for i := range want {
		if r.RowToCol[i] != want[i] {
			t.Fatalf("RowToCol %v, want %v", r.RowToCol, want)
		}
	}
}

func TestAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 1500; trial++ {
		n, m := 1+rng.IntN(7), 1+rng.IntN(7)
		data := make([]float64, n*m)
		for k := range data {
			switch trial % 3 {
			case 0: // small integers: many ties
				data[k] = float64(rng.IntN(4) - 1)
			case 1: // continuous, signed, wide range
				data[k] = rng.NormFloat64() * 100
			default: // all entries equal but a few
				data[k] = 2
				if rng.IntN(5) == 0 {
					data[k] = -rng.Float64()
				}
			}
		}
		c := mat.NewDense(n, m, data)
		r, err := Minimize(c)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, r)
		want := bruteForce(c)
		if math.Abs(r.Total-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("trial %d (%dx%d): total %v, brute force %v\n%v", trial, n, m, r.Total, want, mat.Formatted(c))
		}
	}
}

func TestInvariantToRowShift(t *testing.T) {
	// Every assignment uses row 4 exactly once, so adding 10 to that row shifts the optimum by 10.
	rng := rand.New(rand.NewPCG(3, 5))
	n := 30
	c := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			c.Set(i, j, rng.Float64())
		}
	}
	r1, err := Minimize(c)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < n; j++ {
		c.Set(4, j, c.At(4, j)+10)
	}
	r2, err := Minimize(c)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r2.Total-r1.Total-10) > 1e-9 {
		t.Fatalf("totals %v then %v, want a shift of 10", r1.Total, r2.Total)
	}
}

func TestPermutationRecovered(t *testing.T) {
	// Cost = -similarity of a matrix with a hidden permutation planted as the unique best.
	rng := rand.New(rand.NewPCG(1, 2))
	n := 200
	perm := rng.Perm(n)
	c := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			c.Set(i, j, rng.Float64())
		}
		c.Set(i, perm[i], -1)
	}
	r, err := Minimize(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range perm {
		if r.RowToCol[i] != perm[i] {
			t.Fatalf("row %d -> %d, want %d", i, r.RowToCol[i], perm[i])
		}
	}
}

func TestRejectsNonFinite(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		c := mat.NewDense(2, 2, []float64{1, 2, v, 3})
		if _, err := Minimize(c); err == nil {
			t.Errorf("cost with %v: no error", v)
		}
	}
}

func TestEmpty(t *testing.T) {
	r, err := Minimize(&mat.Dense{})
	if err != nil || len(r.RowToCol) != 0 || r.Total != 0 {
		t.Fatalf("empty: %+v, %v", r, err)
	}
}

func BenchmarkMinimize256(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	c := mat.NewDense(256, 256, nil)
	for i := 0; i < 256; i++ {
		for j := 0; j < 256; j++ {
			c.Set(i, j, rng.Float64())
		}
	}
	for b.Loop() {
		if _, err := Minimize(c); err != nil {
			b.Fatal(err)
		}
	}
}
