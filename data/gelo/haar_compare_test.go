package gelo

import (
	"math"
	"os"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/engine/blas"
)

// TestExamplesLAPACKMatchGo draws the same examples with the LAPACK mixer and with the scalar Go
// QR (the one every example was drawn with before LAPACK) and bounds the differences of A and U
// by float32 round-off: everything else in an example (rows, permutation, shields, the observed
// rows) is identical, because both paths consume the mixing stream alike. It logs max |dA| and
// max |dU| per set size, the figures quoted for the switch. GELOATTACK_MIX_COMPARE=1 adds n 1024
// and draws 8 seeds instead of 3 (some 2 minutes on 2 cores).
func TestExamplesLAPACKMatchGo(t *testing.T) {
	if !blas.HasLAPACK() {
		t.Skipf("no LAPACK in %s", blas.Name())
	}
	sizes, seeds := []int{64, 256}, uint64(3)
	if os.Getenv("GELOATTACK_MIX_COMPARE") == "1" {
		sizes, seeds = append(sizes, 1024), 8
	}
	const d = 512
	c := testCorpus(t, 40, 300, 400, d, 17)
	for _, n := range sizes {
		for _, mix := range []MixKind{MixOrthogonal, MixNonOrthogonal} {
			cfg := DefaultConfig()
			cfg.Positives = Fixed(4)
			cfg.TokensPerText = Fixed(float64(max(1, int(float64(n)/1.1/4))))
			cfg.Mix = mix
			if mix == MixNonOrthogonal {
				cfg.MixCond = Fixed(100)
			}
			var dA, dU, uMax float64
			for seed := uint64(1); seed <= seeds; seed++ {
				cfg.Seed = seed
				s := newSampler(t, c, cfg)
				var wl, wg Workspace
				wg.mx.Lib = blas.Gonum() // no LAPACK: the scalar Go QR
				el, err := s.ExampleWith(&wl, data.Train, int64(seed))
				if err != nil {
					t.Fatal(err)
				}
				eg, err := s.ExampleWith(&wg, data.Train, int64(seed))
				if err != nil {
					t.Fatal(err)
				}
				if el.N != eg.N || len(el.UObs) != len(eg.UObs) {
					t.Fatalf("n=%d %s seed %d: shapes differ", n, mix, seed)
				}
				for i := range el.A {
					dA = max(dA, math.Abs(float64(el.A[i]-eg.A[i])))
				}
				for i := range el.UObs {
					dU = max(dU, math.Abs(float64(el.UObs[i]-eg.UObs[i])))
					uMax = max(uMax, math.Abs(float64(eg.UObs[i])))
				}
			}
			t.Logf("n≈%d %s: max |dA| = %.2e, max |dU| = %.2e (max |U| = %.1f)", n, mix, dA, dU, uMax)
			aTol := 1e-6 // |A| <= 1 orthogonal; kappa 100 spreads the entries, still O(1)
			if mix == MixNonOrthogonal {
				aTol = 1e-5
			}
			if dA > aTol || dU > 1e-5*uMax {
				t.Fatalf("n≈%d %s: |dA| %.2e, |dU| %.2e: more than round-off", n, mix, dA, dU)
			}
		}
	}
}
