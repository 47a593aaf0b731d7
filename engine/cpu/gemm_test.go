package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// TestGemmSplits: every way the backend tiles a product — whole (small), two row tiles, two
// column tiles, four and eight tiles of a longer side (whose bounds fall on multiples of 16), on
// 3 workers so that a worker takes several — computes C = alpha op(A) op(B) + beta C, in every
// transposition, within float32's rounding bound for k terms of a float64 reference, odd sizes
// included: the tiles cover C exactly once.
func TestGemmSplits(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	r := rand.New(rand.NewPCG(3, 9))
	shapes := []struct {
		name    string
		m, n, k int
	}{
		{"small", 5, 7, 3},
		{"two row tiles", 301, 67, 129},
		{"two column tiles", 37, 499, 257},
		{"four row tiles", 4099, 17, 9},    // 4099/1024 rounds down to 4 tiles
		{"eight column tiles", 5, 8209, 7}, // 8209/1024: 8
	}
	for _, sh := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			m, n, k := sh.m, sh.n, sh.k
			a, b, c0 := randn(r, m*k), randn(r, k*n), randn(r, m*n)
			tp := engine.NewTape(be)
			ta, tb, tc := tp.Input(a, len(a)), tp.Input(b, len(b)), tp.Input(c0, len(c0))
			const alpha, beta = 0.75, -0.5
			be.Gemm(tr[0], tr[1], 1, m, n, k, alpha, ta, tb, beta, tc)
			got := tc.ToHost()
			// op(A)[i, l] and op(B)[l, j] in the stored layouts.
			at := func(i, l int) float64 {
				if tr[0] {
					return float64(a[l*m+i])
				}
				return float64(a[i*k+l])
			}
			bt := func(l, j int) float64 {
				if tr[1] {
					return float64(b[j*k+l])
				}
				return float64(b[l*n+j])
			}
			worst := 0.0
			for i := range m {
				for j := range n {
					var s, mag float64
					for l := range k {
						s += at(i, l) * bt(l, j)
						mag += math.Abs(at(i, l) * bt(l, j))
					}
					want := alpha*s + beta*float64(c0[i*n+j])
					worst = max(worst, math.Abs(float64(got[i*n+j])-want)/(alpha*mag+math.Abs(beta*float64(c0[i*n+j]))+1e-30))
				}
			}
			if worst > fptol.Gamma(k+2, fptol.Float32) { // k products, the alpha and beta terms

				t.Errorf("%s (%d x %d x %d, transA %v transB %v): worst error %.2g of the terms' size", sh.name, m, n, k, tr[0], tr[1], worst)
			}
			tp.Reset()
		}
	}
}

func randn(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}
