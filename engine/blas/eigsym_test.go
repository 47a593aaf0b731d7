package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// eigLibs is gonum's eigensolver, plus OpenBLAS's when it loads (it must then bind dsyevd_ and
// cblas_dsyrk: the distribution builds export both).
func eigLibs(t testing.TB) []*Library {
	t.Helper()
	libs, lib := withOpenBLAS(t, "EigSym")
	if lib != nil && !lib.HasEigSym() {
		t.Errorf("%s exports no dsyevd_", lib.Name())
	}
	if lib != nil && lib.gram == nil {
		t.Errorf("%s exports no cblas_dsyrk", lib.Name())
	}
	return libs
}

// randSym draws a symmetric (n, n) matrix with row stride ld: B B^T for B: (n, rank) when
// rank < n (positive semidefinite, rank-deficient), else (B + B^T)/2 (indefinite).
func randSym(r *rand.Rand, n, ld, rank int) []float64 {
	a := randF64(r, (n-1)*ld+n) // padding keeps its random values
	b := randF64(r, n*rank)
	for i := range n {
		for j := range n {
			var s float64
			if rank < n {
				for k := range rank {
					s += b[i*rank+k] * b[j*rank+k]
				}
			} else {
				s = (b[i*n+j] + b[j*n+i]) / 2
			}
			a[i*ld+j] = s
		}
	}
	return a
}

// TestEigSymMatchesGonum decomposes indefinite, rank-deficient and padded symmetric matrices
// with every library: V is orthonormal, V diag(w) V^T = A to 1e-10 relative, w ascending, the
// padding untouched, and the eigenvalues of LAPACK and gonum agree to 1e-10 relative (of the
// largest), and so do their eigenvectors up to sign where the eigenvalue is well separated.
func TestEigSymMatchesGonum(t *testing.T) {
	libs := eigLibs(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range []struct{ n, ld, rank int }{{1, 1, 1}, {2, 2, 2}, {7, 9, 7}, {33, 33, 33}, {64, 64, 64}, {101, 104, 101}, {130, 130, 40}} {
		a0 := randSym(r, s.n, s.ld, s.rank)
		var ws, vs [][]float64
		for _, lib := range libs {
			what := fmt.Sprintf("%s n=%d ld=%d rank=%d", lib.EigSymName(), s.n, s.ld, s.rank)
			v := append([]float64(nil), a0...)
			w := make([]float64, s.n)
			if err := lib.EigSym(s.n, v, s.ld, w); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			checkEig(t, what, s.n, s.ld, a0, v, w)
			ws, vs = append(ws, w), append(vs, v)
		}
		if len(ws) < 2 {
			continue
		}
		top := math.Max(math.Abs(ws[0][0]), math.Abs(ws[0][s.n-1]))
		for j := range s.n {
			if d := math.Abs(ws[0][j] - ws[1][j]); d > 1e-10*top {
				t.Fatalf("n=%d: eigenvalue %d: gonum %g, LAPACK %g", s.n, j, ws[0][j], ws[1][j])
			}
			// Compare vectors whose eigenvalue stands clear of its neighbours (gap > 1e-3
			// of the top), where they are determined up to sign to gonum's round-off over
			// the gap.
			gap := math.Inf(1)
			if j > 0 {
				gap = ws[0][j] - ws[0][j-1]
			}
			if j+1 < s.n {
				gap = min(gap, ws[0][j+1]-ws[0][j])
			}
			if gap < 1e-3*top {
				continue
			}
			var dot float64
			for i := range s.n {
				dot += vs[0][i*s.ld+j] * vs[1][i*s.ld+j]
			}
			sign := math.Copysign(1, dot)
			for i := range s.n {
				if d := math.Abs(vs[0][i*s.ld+j] - sign*vs[1][i*s.ld+j]); d > 1e-8 {
					t.Fatalf("n=%d: eigenvector %d differs at %d by %g (gap %g)", s.n, j, i, d, gap)
				}
			}
		}
	}
}

// checkEig checks w ascending, V^T V = I to 1e-12, ||V diag(w) V^T - A|| <= 1e-10 ||A||
// (Frobenius) and a's row padding untouched. a0, v: (n, n) with stride ld.
func checkEig(t *testing.T, what string, n, ld int, a0, v, w []float64) {
	t.Helper()
	for j := 1; j < n; j++ {
		if w[j] < w[j-1] {
			t.Fatalf("%s: eigenvalues not ascending at %d: %g < %g", what, j, w[j], w[j-1])
		}
	}
	var num, den float64
	for i := range n {
		for j := range n {
			var vtv, rec float64
			for k := range n {
				vtv += v[k*ld+i] * v[k*ld+j]
				rec += v[i*ld+k] * w[k] * v[j*ld+k]
			}
			if i == j {
				vtv--
			}
			if math.Abs(vtv) > 1e-12 {
				t.Fatalf("%s: (V^T V - I)[%d,%d] = %g", what, i, j, vtv)
			}
			d := rec - a0[i*ld+j]
			num += d * d
			den += a0[i*ld+j] * a0[i*ld+j]
		}
	}
	if rel := math.Sqrt(num / den); rel > 1e-10 {
		t.Fatalf("%s: ||V diag(w) V^T - A|| / ||A|| = %g", what, rel)
	}
	for i := 0; i < n-1; i++ {
		for j := n; j < ld; j++ {
			if v[i*ld+j] != a0[i*ld+j] {
				t.Fatalf("%s wrote into a's row padding at (%d,%d)", what, i, j)
			}
		}
	}
}

// TestEigSymRankDeficient checks that a rank-r PSD matrix has n - r eigenvalues at round-off
// (|w| <= 1e-12 of the top) and r clearly positive ones, on every library.
func TestEigSymRankDeficient(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const n, rank = 90, 25
	a0 := randSym(r, n, n, rank)
	for _, lib := range eigLibs(t) {
		v := append([]float64(nil), a0...)
		w := make([]float64, n)
		if err := lib.EigSym(n, v, n, w); err != nil {
			t.Fatal(err)
		}
		top := w[n-1]
		for j := range n - rank {
			if math.Abs(w[j]) > 1e-12*top {
				t.Fatalf("%s: eigenvalue %d of a rank-%d matrix is %g (top %g)", lib.EigSymName(), j, rank, w[j], top)
			}
		}
		if w[n-rank] < 1e-3*top {
			t.Fatalf("%s: eigenvalue %d is %g, want one of the %d positive ones (top %g)", lib.EigSymName(), n-rank, w[n-rank], rank, top)
		}
	}
}

// TestGram checks A A^T and A^T A against a plain triple loop on every library, with padded
// strides, both triangles filled and c's padding untouched.
func TestGram(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, lib := range eigLibs(t) {
		for _, s := range []struct{ rows, cols, lda int }{{1, 1, 1}, {5, 3, 4}, {17, 40, 41}, {64, 9, 9}} {
			a := randF64(r, (s.rows-1)*s.lda+s.cols)
			for _, tr := range []bool{false, true} {
				n, k := s.rows, s.cols
				if tr {
					n, k = s.cols, s.rows
				}
				ldc := n + 2
				c := randF64(r, (n-1)*ldc+n)
				c0 := append([]float64(nil), c...)
				lib.Gram(tr, n, k, a, s.lda, c, ldc)
				for i := range n {
					for j := range n {
						var want float64
						for l := range k {
							if tr {
								want += a[l*s.lda+i] * a[l*s.lda+j]
							} else {
								want += a[i*s.lda+l] * a[j*s.lda+l]
							}
						}
						if d := math.Abs(c[i*ldc+j] - want); d > 1e-12*(1+math.Abs(want))*float64(k) {
							t.Fatalf("%s %+v trans=%v: C[%d,%d] = %g, want %g", lib.Name(), s, tr, i, j, c[i*ldc+j], want)
						}
					}
					for j := n; j < ldc && i < n-1; j++ {
						if c[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("%s %+v trans=%v wrote into c's padding at (%d,%d)", lib.Name(), s, tr, i, j)
						}
					}
				}
			}
		}
	}
}

// TestEigSymChecks refuses short slices and strides with an error, and n = 0 is a no-op.
func TestEigSymChecks(t *testing.T) {
	lib := Gonum()
	if err := lib.EigSym(0, nil, 1, nil); err != nil {
		t.Fatalf("n = 0: %v", err)
	}
	for _, c := range []struct {
		n, la, lda, lw int
	}{{-1, 0, 1, 0}, {3, 8, 3, 3}, {3, 9, 2, 3}, {3, 9, 3, 2}} {
		if err := lib.EigSym(c.n, make([]float64, c.la), c.lda, make([]float64, c.lw)); err == nil {
			t.Fatalf("%+v: no error", c)
		}
	}
}
