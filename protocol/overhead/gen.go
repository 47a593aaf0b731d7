package overhead

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine/blas"
)

// generator draws the secret matrices of one n on the trusted side. Its construction mirrors
// data/gelo's mixer (haar.go: haar, orthogonal, nonOrthogonal): the same distributions from the
// same math, in float64 then rounded to float32, but with the O(n^3) work on engine/blas (LAPACK
// QR and DGEMM) where the sampler runs scalar Go. It is not safe for concurrent use.
type generator struct {
	lib    *blas.Library
	n      int
	q1, q2 []float64 // (n, n) row-major float64 scratch: the Haar factors
	prod   []float64 // (n, n) float64 product before rounding
	s      []float64 // (n) singular values of the kappa A
}

func newGenerator(lib *blas.Library, n int) *generator {
	return &generator{lib: lib, n: n, q1: make([]float64, n*n), q2: make([]float64, n*n), prod: make([]float64, n*n), s: make([]float64, n)}
}

// haar draws a Haar-orthogonal Q into q: (n, n), row-major float64: the Q of the QR of a
// standard Gaussian matrix with column j multiplied by sign(R_jj) (blas.QR with positive set).
// The sampler fills its Gaussian column by column, this one row by row: the entries are i.i.d.,
// so the distribution is the same.
func (g *generator) haar(rng *rand.Rand, q []float64) error {
	for i := range q {
		q[i] = rng.NormFloat64()
	}
	if err := g.lib.QR(g.n, g.n, q, g.n, nil, 0, true); err != nil {
		return fmt.Errorf("haar draw, n = %d: %w", g.n, err)
	}
	return nil
}

// orthogonal draws a Haar A into a: (n, n) row-major float32. Its inverse is A^T.
func (g *generator) orthogonal(rng *rand.Rand, a []float32) error {
	if err := g.haar(rng, g.q1); err != nil {
		return err
	}
	for i, v := range g.q1 {
		a[i] = float32(v)
	}
	return nil
}

// kappa draws A = Q1 diag(s) Q2^T into a and A^-1 = Q2 diag(1/s) Q1^T into ainv (both (n, n)
// row-major float32), Q1 and Q2 Haar and s log-spaced in [1, kappa] in random order, so that
// cond(A) = kappa (n >= 2). A^-1 comes from the same factors: the trusted side that drew A
// knows them, so one more GEMM (2 n^3 flops, what an LU inversion would also cost) gives it
// without solving a system. Both are formed in float64 and rounded to float32 separately, as the
// sampler rounds A.
func (g *generator) kappa(rng *rand.Rand, kappa float64, a, ainv []float32) error {
	n := g.n
	if err := g.haar(rng, g.q1); err != nil {
		return err
	}
	if err := g.haar(rng, g.q2); err != nil {
		return err
	}
	s := g.s
	s[0] = 1
	for i := 1; i < n; i++ {
		s[i] = math.Pow(kappa, float64(i)/float64(n-1))
	}
	s[n-1] = kappa // exact, whatever Pow's last bit
	rng.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })

	// Q1 diag(s): column j of Q1 times s_j.
	for i := range n {
		row := g.q1[i*n : (i+1)*n]
		for j, sj := range s {
			row[j] *= sj
		}
	}
	// A = (Q1 diag(s)) Q2^T.
	g.lib.Dgemm(false, true, n, n, n, 1, g.q1, n, g.q2, n, 0, g.prod, n)
	for i, v := range g.prod {
		a[i] = float32(v)
	}
	// A^-1 = Q2 diag(1/s) Q1^T = (Q2 diag(1/s^2)) (Q1 diag(s))^T, reusing the scaled Q1.
	for i := range n {
		row := g.q2[i*n : (i+1)*n]
		for j, sj := range s {
			row[j] /= sj * sj
		}
	}
	g.lib.Dgemm(false, true, n, n, n, 1, g.q2, n, g.q1, n, 0, g.prod, n)
	for i, v := range g.prod {
		ainv[i] = float32(v)
	}
	return nil
}
