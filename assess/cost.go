package assess

import "fmt"

// Cost is what a setting costs the deployer per protected call, counted in floating-point
// operations with the parts protocol/overhead times (its package comment): A generation, the mix
// U = A [H; S], the offloaded GEMM Y = U W and the unmix A^-1 Y, against the plain GEMM H W. It
// is a model, not a measurement: A is drawn on the host in float64, whose FLOPs are slower than
// the GEMMs' (docs/protocol.md), so the measured overhead is larger wherever A generation
// dominates; `geloattack protocol bench -n N -d D -p P` measures it on the deployer's hardware.
type Cost struct {
	// N is the clean rows n of a full call, Shields the shield rows, D the row width and P the
	// projection's width (the fused Q/K/V output).
	N, Shields, D, P int
	// Kappa is cond(A) (1: orthogonal A, unmixed with A^T).
	Kappa float64
	// Baseline, Generation, Mix, GEMM and Unmix are FLOPs of one call.
	Baseline, Generation, Mix, GEMM, Unmix float64
}

// CostOf is the cost model of s for a model of width d and Q/K/V width p, at the setting's
// nominal n (texts per call x tokens per text) and shield count:
//
//	baseline    2 n d p
//	generation  8/3 m^3 (Householder QR and forming Q, m = n + shields); cond(A) = kappa: two
//	            Haar factors and the products A = Q1 diag(s) Q2^T and A^-1, 16/3 m^3 + 4 m^3
//	mix         2 m^2 d;  GEMM 2 m d p;  unmix 2 m^2 p
func CostOf(s Setting, d, p int) Cost {
	n := s.NominalRows()
	k := s.Shields(n)
	m := float64(n + k)
	c := Cost{N: n, Shields: k, D: d, P: p, Kappa: s.Kappa}
	fd, fp := float64(d), float64(p)
	c.Baseline = 2 * float64(n) * fd * fp
	c.Generation = 8.0 / 3 * m * m * m
	if s.Mix == MixKappa {
		c.Generation = 16.0/3*m*m*m + 4*m*m*m
	}
	c.Mix = 2 * m * m * fd
	c.GEMM = 2 * m * fd * fp
	c.Unmix = 2 * m * m * fp
	return c
}

// Total is GELO's FLOPs per call.
func (c Cost) Total() float64 { return c.Generation + c.Mix + c.GEMM + c.Unmix }

// Overhead is (Total - Baseline) / Baseline in percent.
func (c Cost) Overhead() float64 { return 100 * (c.Total() - c.Baseline) / c.Baseline }

// Ratio is Total / Baseline: how many times the plain call's FLOPs GELO spends.
func (c Cost) Ratio() float64 { return c.Total() / c.Baseline }

// RowFactor is (n + shields) / n: the rows through every protected GEMM against the plain ones.
func (c Cost) RowFactor() float64 { return float64(c.N+c.Shields) / float64(c.N) }

// String is the cost in one line.
func (c Cost) String() string {
	return fmt.Sprintf("overhead %s%% of the plain call's FLOPs (x%s; rows x%.2f: n %d + %d shields, d %d, p %d)",
		fmtPct(c.Overhead()), fmtNum(c.Ratio()), c.RowFactor(), c.N, c.Shields, c.D, c.P)
}
