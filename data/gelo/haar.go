package gelo

import (
	"math"
	"math/rand/v2"
)

// mixer holds the float64 scratch of one worker for drawing mixing matrices. It is not safe for
// concurrent use; each worker owns one.
type mixer struct {
	g, q, q2 []float64 // (n, n) column-major
	tau, dg  []float64 // (n)
}

// grow returns buf resized to n, reusing its storage when large enough.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// haar draws a Haar-distributed orthogonal matrix into q (n x n, column-major, q(i,j) = q[j*n+i]):
// the Q of a Householder QR of a standard Gaussian matrix with column j multiplied by sign(R_jj).
// Without that sign fix (signFix false, for tests only) the distribution is not Haar: Householder
// chooses R_jj = -sign(x_0)||x||, which biases the diagonal of Q.
// Cost 8/3 n^3 flops, single-threaded: callers parallelise over examples.
func (mx *mixer) haar(rng *rand.Rand, n int, q []float64, signFix bool) {
	g := grow(mx.g, n*n)
	mx.g = g
	tau := grow(mx.tau, n)
	mx.tau = tau
	rdiag := grow(mx.dg, n)
	mx.dg = rdiag
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

// orthogonal draws a Haar matrix A into a (n x n, row-major float32).
func (mx *mixer) orthogonal(rng *rand.Rand, n int, a []float32) {
	mx.q = grow(mx.q, n*n)
	mx.haar(rng, n, mx.q, true)
	q := mx.q
	for i := 0; i < n; i++ {
		row := a[i*n : (i+1)*n]
		for j := range row {
			row[j] = float32(q[j*n+i])
		}
	}
}

// nonOrthogonal draws A = Q1 diag(s) Q2^T into a (n x n, row-major float32), Q1 and Q2 Haar and s
// log-spaced in [1, kappa] in random order, so that cond(A) = kappa (for n >= 2).
func (mx *mixer) nonOrthogonal(rng *rand.Rand, n int, kappa float64, a []float32) {
	mx.q = grow(mx.q, n*n)
	mx.q2 = grow(mx.q2, n*n)
	q1, q2 := mx.q, mx.q2
	mx.haar(rng, n, q1, true)
	mx.haar(rng, n, q2, true)
	s := make([]float64, n) // s: (n)
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
	// Row i of A accumulates sum_j (Q1(i,j) s_j) Q2(:,j)^T, four j at a time so that each
	// load and store of the row serves four columns of Q2.
	row := grow(mx.tau, n) // row: (n), the float64 accumulator of one row of A; tau is free now
	mx.tau = row
	for i := 0; i < n; i++ {
		clear(row)
		j := 0
		for ; j+4 <= n; j += 4 {
			axpy4(q1[j*n+i], q1[(j+1)*n+i], q1[(j+2)*n+i], q1[(j+3)*n+i],
				q2[j*n:(j+1)*n], q2[(j+1)*n:(j+2)*n], q2[(j+2)*n:(j+3)*n], q2[(j+3)*n:(j+4)*n], row)
		}
		for ; j < n; j++ {
			axpy(q1[j*n+i], q2[j*n:(j+1)*n], row)
		}
		for l, x := range row {
			a[i*n+l] = float32(x)
		}
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

// axpy4 is y += a0 x0 + a1 x1 + a2 x2 + a3 x3 over len(y) (each x at least as long).
func axpy4(a0, a1, a2, a3 float64, x0, x1, x2, x3, y []float64) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += a0*x0[i] + a1*x1[i] + a2*x2[i] + a3*x3[i]
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
