package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestGemmSplits: every way the backend splits a product over its workers — whole (small),
// row blocks of parallelRows, one row block per worker, one column block per worker (an
// operand of 2^20 floats or more) — computes C = alpha op(A) op(B) + beta C, in every
// transposition, to float32 accuracy against a float64 reference, odd sizes included.
func TestGemmSplits(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
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
		{"row blocks", 301, 67, 129},
		{"rows per worker", 2051, 97, 513},    // m k >= 2^20: op(B) small, split rows
		{"columns per worker", 37, 4099, 257}, // k n >= 2^20: op(A) small, split columns
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
			if worst > 1e-5 {
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
