// Package mixing is the one definition of GELO's secret mixing matrix A (U = A [H; S]): a
// Haar-distributed orthogonal A, or A = Q1 diag(s) Q2^T with Q1, Q2 Haar and s log-spaced in
// [1, kappa] so that cond(A) = kappa, each with its inverse. The example sampler (data/gelo), the
// protocol's overhead bench (protocol/overhead) and its output-equality check (protocol/equality)
// all draw A here, so the same stream gives the same A in all three (tested).
//
// Which QR runs: LAPACK's dgeqrf/dorgqr (engine/blas QRColMajor) when the library (Mixer.Lib, nil
// meaning blas.Default()) has LAPACK, which is the case whenever OpenBLAS loads; otherwise
// (blas.Gonum(), GELOATTACK_BLAS=gonum, or no OpenBLAS on the machine) the scalar Go Householder
// QR of this package (haarGo). Both take the same Gaussian draws in the same order and give the
// same Q to round-off; a caller that needs the same bits on every machine passes blas.Gonum().
package mixing

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine/blas"
)

// Mixer draws mixing matrices with one worker's float64 scratch. It is not safe for concurrent
// use; each worker owns one; the zero value is ready.
type Mixer struct {
	// Lib is the BLAS/LAPACK the draws compute with; nil means blas.Default().
	Lib *blas.Library

	g, q, q2 []float64 // (n, n) column-major
	prod     []float64 // (n, n) row-major float64 product
	a64      []float64 // (n, n) row-major: the float64 A of a float32 draw
	s        []float64 // (n): singular values of the last conditioned draw
	tau, dg  []float64 // (n)
	qrw      blas.QRWork

	// last says what the factors in q (and q2, s) hold: 0 nothing, kindOrthogonal, kindConditioned;
	// lastN their size. Inverse reads them.
	last, lastN int
}

const (
	kindOrthogonal = 1 + iota
	kindConditioned
)

// library is the BLAS/LAPACK the mixer computes with.
func (m *Mixer) library() *blas.Library {
	if m.Lib == nil {
		m.Lib = blas.Default()
	}
	return m.Lib
}

// grow returns buf resized to n, reusing its storage when large enough.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// Haar draws a Haar-distributed orthogonal matrix into q (n x n, column-major, q(i,j) = q[j*n+i]):
// the Q of a Householder QR of a standard Gaussian matrix with column j multiplied by sign(R_jj).
// The n^2 Gaussian draws fill q column by column (draw k is G(k mod n, k div n)), whichever QR
// runs. Cost 8/3 n^3 flops on LAPACK (blocked, single-threaded) or in scalar Go.
func (m *Mixer) Haar(rng *rand.Rand, n int, q []float64) { m.haar(rng, n, q, true) }

// haar is Haar; without the sign fix (signFix false, for tests only) the distribution is not
// Haar: Householder chooses R_jj = -sign(x_0)||x||, which biases the diagonal of Q.
//
// It panics when LAPACK refuses its arguments: the sizes are the mixer's own, so that is a bug.
func (m *Mixer) haar(rng *rand.Rand, n int, q []float64, signFix bool) {
	lib := m.library()
	if !lib.HasLAPACK() {
		m.haarGo(rng, n, q, signFix)
		return
	}
	q = q[:n*n]
	for i := range q {
		q[i] = rng.NormFloat64()
	}
	// Single-threaded: LAPACK's QR splits its sums by OpenBLAS's thread count, so a threaded draw's
	// bits would follow GOMAXPROCS; callers parallelise over examples.
	var err error
	lib.Serial(func() { err = lib.QRColMajor(n, n, q, n, signFix, &m.qrw) })
	if err != nil {
		panic(fmt.Sprintf("mixing: Haar draw, n = %d: %v", n, err))
	}
}

// haarGo is haar in scalar Go: the same draws into the same places, an unblocked Householder QR
// and the backward accumulation of Q. Single-threaded: callers parallelise over examples.
func (m *Mixer) haarGo(rng *rand.Rand, n int, q []float64, signFix bool) {
	g := grow(m.g, n*n)
	m.g = g
	tau := grow(m.tau, n)
	m.tau = tau
	rdiag := grow(m.dg, n)
	m.dg = rdiag
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	// QR: the Householder vector of step j overwrites column j from row j down.
	for j := 0; j < n; j++ {
		v := g[j*n+j : (j+1)*n] // x: (n-j)
		norm := math.Sqrt(dot(v, v))
		if norm == 0 { // probability zero; H_j = I, R_jj = 0 taken as positive
			tau[j], rdiag[j] = 0, 1
			continue
		}
		alpha := -math.Copysign(norm, v[0])
		v[0] -= alpha
		tau[j] = 2 / dot(v, v)
		rdiag[j] = alpha
		reflectCols(tau[j], v, g, n, j, j+1)
	}
	// Q = H_0 H_1 ... H_{n-1} I, accumulated backwards: before H_j is applied, columns < j of the
	// partial product are still unit vectors with zeros in rows >= j, so only columns >= j change.
	clear(q[:n*n])
	for i := 0; i < n; i++ {
		q[i*n+i] = 1
	}
	for j := n - 1; j >= 0; j-- {
		if tau[j] != 0 {
			reflectCols(tau[j], g[j*n+j:(j+1)*n], q, n, j, j)
		}
	}
	if signFix {
		for j := 0; j < n; j++ {
			if rdiag[j] < 0 {
				col := q[j*n : (j+1)*n]
				for i := range col {
					col[i] = -col[i]
				}
			}
		}
	}
}

// Orthogonal64 draws a Haar A into a: (n, n) row-major float64. Its inverse is A^T.
func (m *Mixer) Orthogonal64(rng *rand.Rand, n int, a []float64) {
	m.q = grow(m.q, n*n)
	m.haar(rng, n, m.q, true)
	q := m.q
	for i := 0; i < n; i++ {
		row := a[i*n : (i+1)*n]
		for j := range row {
			row[j] = q[j*n+i]
		}
	}
	m.last, m.lastN = kindOrthogonal, n
}

// Orthogonal is Orthogonal64 rounded to float32: a (n, n) row-major.
func (m *Mixer) Orthogonal(rng *rand.Rand, n int, a []float32) {
	m.a64 = grow(m.a64, n*n)
	m.Orthogonal64(rng, n, m.a64)
	round32(a[:n*n], m.a64)
}

// Conditioned64 draws A = Q1 diag(s) Q2^T into a ((n, n) row-major float64), Q1 and Q2 Haar and s
// log-spaced in [1, kappa] in random order, so that cond(A) = kappa (for n >= 2).
func (m *Mixer) Conditioned64(rng *rand.Rand, n int, kappa float64, a []float64) {
	m.q = grow(m.q, n*n)
	m.q2 = grow(m.q2, n*n)
	q1, q2 := m.q, m.q2
	m.haar(rng, n, q1, true)
	m.haar(rng, n, q2, true)
	s := grow(m.s, n) // s: (n)
	m.s = s
	s[0] = 1
	for i := 1; i < n; i++ {
		s[i] = math.Pow(kappa, float64(i)/float64(n-1))
	}
	if n > 1 {
		s[n-1] = kappa // exact, whatever Pow's last bit
	}
	rng.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
	// A(i,l) = sum_j Q1(i,j) s_j Q2(l,j); Q1(i,j) = q1[j*n+i], Q2(l,j) = q2[j*n+l].
	for j := 0; j < n; j++ {
		col := q1[j*n : (j+1)*n]
		for i := range col {
			col[i] *= s[j]
		}
	}
	// A = (Q1 diag(s)) Q2^T in float64. Column-major storage of X read as row-major is X^T: q1
	// holds (Q1 diag(s))^T and q2 holds Q2^T, so A = q1^T q2.
	m.library().Dgemm(true, false, n, n, n, 1, q1, n, q2, n, 0, a[:n*n], n)
	m.last, m.lastN = kindConditioned, n
}

// Conditioned is Conditioned64 rounded to float32: a (n, n) row-major.
func (m *Mixer) Conditioned(rng *rand.Rand, n int, kappa float64, a []float32) {
	m.prod = grow(m.prod, n*n)
	m.Conditioned64(rng, n, kappa, m.prod)
	round32(a[:n*n], m.prod)
}

// Inverse64 writes the inverse of the last drawn A into ainv ((n, n) row-major float64), from its
// factors: A^T for an orthogonal A, Q2 diag(1/s) Q1^T for a conditioned one. The trusted side
// that drew A knows them, so one GEMM (2 n^3 flops, what an LU inversion would also cost) gives
// the inverse without solving a system. It may be called once per draw: it consumes the factors.
func (m *Mixer) Inverse64(ainv []float64) error {
	n := m.lastN
	switch m.last {
	case kindOrthogonal:
		// q holds Q column-major, which read row-major is Q^T = A^-1.
		copy(ainv[:n*n], m.q[:n*n])
	case kindConditioned:
		// A^-1(i,l) = sum_j Q2(i,j) / s_j * Q1(l,j) = sum_j (Q2(i,j) / s_j^2) (Q1(l,j) s_j): scale
		// Q2's columns by 1/s_j^2 and reuse Q1 diag(s) from the draw. Read row-major, q2 holds
		// (Q2 diag(1/s^2))^T and q1 (Q1 diag(s))^T, so A^-1 = q2^T q1.
		q1, q2, s := m.q, m.q2, m.s
		for j := 0; j < n; j++ {
			col := q2[j*n : (j+1)*n]
			inv := 1 / (s[j] * s[j])
			for i := range col {
				col[i] *= inv
			}
		}
		m.library().Dgemm(true, false, n, n, n, 1, q2, n, q1, n, 0, ainv[:n*n], n)
	default:
		return fmt.Errorf("mixing: inverse asked before a draw (or twice for one draw)")
	}
	m.last = 0
	return nil
}

// Inverse is Inverse64 rounded to float32: ainv (n, n) row-major.
func (m *Mixer) Inverse(ainv []float32) error {
	n := m.lastN
	m.prod = grow(m.prod, n*n)
	if err := m.Inverse64(m.prod); err != nil {
		return err
	}
	round32(ainv[:n*n], m.prod)
	return nil
}

// round32 rounds src to float32 into dst (same length).
func round32(dst []float32, src []float64) {
	for i, x := range src[:len(dst)] {
		dst[i] = float32(x)
	}
}

// dot is sum x_i y_i over len(x) (len(y) >= len(x)).
func dot(x, y []float64) float64 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy is y += alpha x over len(x) (len(y) >= len(x)).
func axpy(alpha float64, x, y []float64) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y[i] += alpha * x[i]
		y[i+1] += alpha * x[i+1]
		y[i+2] += alpha * x[i+2]
		y[i+3] += alpha * x[i+3]
	}
	for ; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}

// reflect4 applies I - tau v v^T to the four columns c0..c3 (each at least len(v) long). Sharing
// each load of v between four columns roughly doubles the speed of the one-column loops.
func reflect4(tau float64, v, c0, c1, c2, c3 []float64) {
	n := len(v)
	c0, c1, c2, c3 = c0[:n], c1[:n], c2[:n], c3[:n]
	var s0, s1, s2, s3 float64
	for i, x := range v {
		s0 += x * c0[i]
		s1 += x * c1[i]
		s2 += x * c2[i]
		s3 += x * c3[i]
	}
	s0, s1, s2, s3 = -tau*s0, -tau*s1, -tau*s2, -tau*s3
	for i, x := range v {
		c0[i] += s0 * x
		c1[i] += s1 * x
		c2[i] += s2 * x
		c3[i] += s3 * x
	}
}

// reflectCols applies I - tau v v^T to columns first..n-1 of the column-major matrix m (columns
// of length n), rows off..n-1, where v has length n-off. Single-threaded: at ~7 GFLOPS (float64,
// scalar Go) a draw costs 8/3 n^3 flops, 6 ms at n = 256; parallelism comes from the workers.
func reflectCols(tau float64, v, m []float64, n, off, first int) {
	c := first
	for ; c+4 <= n; c += 4 {
		reflect4(tau, v, m[c*n+off:], m[(c+1)*n+off:], m[(c+2)*n+off:], m[(c+3)*n+off:])
	}
	for ; c < n; c++ {
		col := m[c*n+off : (c+1)*n]
		axpy(-tau*dot(v, col), v, col)
	}
}
