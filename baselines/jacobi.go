package baselines

import (
	"context"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// symSet is K symmetric m x m matrices interleaved: entry (i, j) of matrix k is
// data[(i*m + j)*K + k]. With the matrix index innermost, a Jacobi rotation's row update (rows p
// and q of every matrix) and column update (columns p and q) both stream contiguous runs of K
// values, instead of striding through K separate matrices. Entries are float32: a sweep at
// m = K = 256 streams the whole set hundreds of times, so halving its size nearly halves the
// time, and 1e-7 relative round-off is far below the ~1/sqrt(T) noise of estimated cumulants.
// Angles are accumulated in float64.
type symSet struct {
	m, k int
	data []float32
}

func newSymSet(m, k int) *symSet { return &symSet{m: m, k: k, data: make([]float32, m*m*k)} }

// cell returns the K values of entry (i, j) across the matrices.
func (s *symSet) cell(i, j int) []float32 {
	o := (i*s.m + j) * s.k
	return s.data[o : o+s.k]
}

// setMatrix writes matrix k from a dense m x m source.
func (s *symSet) setMatrix(k int, src *mat.Dense) {
	for i := 0; i < s.m; i++ {
		for j, v := range src.RawRowView(i) {
			s.data[(i*s.m+j)*s.k+k] = float32(v)
		}
	}
}

// jdResult reports a joint diagonalisation.
type jdResult struct {
	v         *mat.Dense // (m, m) orthogonal: V^T M_k V is nearly diagonal for every k
	sweeps    int
	rotations int
	firstMax  float64 // largest |sin| of a rotation applied in the first sweep
	converged bool
}

// parallelWork is the number of values a rotation updates above which the update is split across
// goroutines; below it the hand-off costs more than it saves.
const parallelWork = 1 << 15

// jointDiagonalize finds an orthogonal V that jointly diagonalises the symmetric matrices of s by
// Jacobi rotations (Cardoso & Souloumiac 1996): for each pair (p, q) the angle maximising the sum
// over k of the squared diagonal entries has a closed form from the 2x2 matrix
// G = sum_k g_k g_k^T, g_k = (M_k[p,p] - M_k[q,q], M_k[p,q] + M_k[q,p]). Rotations smaller than
// thresh (|sin|) are skipped; sweeps stop when one makes none, or after maxSweeps. s is rotated in
// place into V^T M_k V.
func jointDiagonalize(ctx context.Context, s *symSet, thresh float64, maxSweeps int) (jdResult, error) {
	m := s.m
	v := mat.NewDense(m, m, nil)
	for i := 0; i < m; i++ {
		v.Set(i, i, 1)
	}
	workers := 1
	if m*s.k >= parallelWork {
		workers = min(runtime.GOMAXPROCS(0), m)
	}
	res := jdResult{v: v}
	for res.sweeps < maxSweeps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.sweeps++
		rotated := false
		for p := 0; p < m-1; p++ {
			for q := p + 1; q < m; q++ {
				c, sn := jacobiAngle(s.cell(p, p), s.cell(q, q), s.cell(p, q), s.cell(q, p))
				if math.Abs(sn) <= thresh {
					continue
				}
				rotated = true
				res.rotations++
				if res.sweeps == 1 {
					res.firstMax = max(res.firstMax, math.Abs(sn))
				}
				s.rotate(p, q, c, sn, workers)
				for i := 0; i < m; i++ {
					row := v.RawRowView(i)
					a, b := row[p], row[q]
					row[p] = c*a + sn*b
					row[q] = -sn*a + c*b
				}
			}
		}
		if !rotated {
			res.converged = true
			break
		}
	}
	return res, nil
}

// jacobiAngle returns cos and sin of the joint-diagonalisation angle for one pair, given the
// pair's entries across the matrices: pp = M_k[p,p], qq = M_k[q,q], pq = M_k[p,q], qp = M_k[q,p].
func jacobiAngle(pp, qq, pq, qp []float32) (c, s float64) {
	var g11, g22, g12 float64
	for k := range pp {
		g1 := float64(pp[k]) - float64(qq[k])
		g2 := float64(pq[k]) + float64(qp[k])
		g11 += g1 * g1
		g22 += g2 * g2
		g12 += g1 * g2
	}
	ton := g11 - g22
	toff := 2 * g12
	theta := 0.5 * math.Atan2(toff, ton+math.Hypot(ton, toff))
	return math.Cos(theta), math.Sin(theta)
}

// rotate replaces every matrix M_k by G^T M_k G, where G is the identity except for
// G[p,p] = G[q,q] = c, G[p,q] = -s, G[q,p] = s. Only rows p and q are rotated arithmetically:
// by symmetry, column p (q) of the result equals its row p (q) outside the 2x2 block {p, q}, so
// those cells are copied, and the block alone gets the second, column-side rotation.
func (s *symSet) rotate(p, q int, c, sn float64, workers int) {
	m, k := s.m, s.k
	// Rows p and q: contiguous blocks of m*K values.
	rp := s.data[p*m*k : (p+1)*m*k]
	rq := s.data[q*m*k : (q+1)*m*k]
	parallelFor(workers, m*k, func(_, lo, hi int) {
		givens(rp[lo:hi], rq[lo:hi], c, sn)
	})
	parallelFor(workers, m, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			if i != p && i != q {
				copy(s.cell(i, p), s.cell(p, i))
				copy(s.cell(i, q), s.cell(q, i))
			}
		}
	})
	givens(s.cell(p, p), s.cell(p, q), c, sn)
	givens(s.cell(q, p), s.cell(q, q), c, sn)
}

// givens sets (x, y) <- (c x + s y, -s x + c y) elementwise, four at a time (which the compiler
// schedules better than the plain loop: ~1.5x here).
func givens(x, y []float32, c64, s64 float64) {
	c, s := float32(c64), float32(s64)
	n := len(x)
	y = y[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		a0, a1, a2, a3 := xs[0], xs[1], xs[2], xs[3]
		b0, b1, b2, b3 := ys[0], ys[1], ys[2], ys[3]
		xs[0], xs[1], xs[2], xs[3] = c*a0+s*b0, c*a1+s*b1, c*a2+s*b2, c*a3+s*b3
		ys[0], ys[1], ys[2], ys[3] = c*b0-s*a0, c*b1-s*a1, c*b2-s*a2, c*b3-s*a3
	}
	for ; i < n; i++ {
		a, b := x[i], y[i]
		x[i] = c*a + s*b
		y[i] = c*b - s*a
	}
}

// parallelFor splits [0, n) into workers contiguous ranges and runs f on each, f(worker, lo, hi).
func parallelFor(workers, n int, f func(w, lo, hi int)) {
	if workers <= 1 || n < workers {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w, lo, hi)
		}()
	}
	wg.Wait()
}
