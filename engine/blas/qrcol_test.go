package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestQRColMajorIsQRTransposed: the column-major QR of M gives, on LAPACK and on gonum, the Q
// that the row-major QR gives for the same M (to round-off), orthonormal to 1e-12, with the
// column padding untouched and the scratch reusable across shapes.
func TestQRColMajorIsQRTransposed(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, lib := range qrLibs(t) {
		var ws QRWork // shared across shapes: grown and reused
		for _, s := range []struct{ m, n, ld int }{{1, 1, 1}, {6, 6, 6}, {40, 37, 43}, {64, 64, 64}, {97, 64, 100}, {200, 200, 200}} {
			for _, positive := range []bool{false, true} {
				what := fmt.Sprintf("%s %dx%d ld %d positive=%v", lib.QRName(), s.m, s.n, s.ld, positive)
				col := randF64(r, (s.n-1)*s.ld+s.m) // col: (m, n) column-major, ld s.ld
				orig := append([]float64(nil), col...)
				row := make([]float64, s.m*s.n) // row: (m, n) row-major, the same M
				for i := range s.m {
					for j := range s.n {
						row[i*s.n+j] = col[j*s.ld+i]
					}
				}
				rr := make([]float64, s.n*s.n)
				if err := lib.QR(s.m, s.n, row, s.n, rr, s.n, positive); err != nil {
					t.Fatalf("%s: QR: %v", what, err)
				}
				if err := lib.QRColMajor(s.m, s.n, col, s.ld, positive, &ws); err != nil {
					t.Fatalf("%s: QRColMajor: %v", what, err)
				}
				for j := range s.n {
					for i := range s.m {
						if d := math.Abs(col[j*s.ld+i] - row[i*s.n+j]); d > 1e-12 {
							t.Fatalf("%s: Q[%d,%d] = %g column-major, %g row-major", what, i, j, col[j*s.ld+i], row[i*s.n+j])
						}
					}
					for i := s.m; i < s.ld && j < s.n-1; i++ {
						if col[j*s.ld+i] != orig[j*s.ld+i] {
							t.Fatalf("%s wrote into the padding of column %d", what, j)
						}
					}
					for k := range s.n { // Q^T Q = I
						var dot float64
						for i := range s.m {
							dot += col[j*s.ld+i] * col[k*s.ld+i]
						}
						if j == k {
							dot--
						}
						if math.Abs(dot) > 1e-12 {
							t.Fatalf("%s: (Q^T Q - I)[%d,%d] = %g", what, j, k, dot)
						}
					}
				}
			}
		}
	}
}

// TestQRColMajorSignFix: with positive set, Q^T M (= R) has a non-negative diagonal; without it,
// LAPACK's reflectors leave R_jj = -sign(M_jj) ||x||, so some diagonal entries are negative.
func TestQRColMajorSignFix(t *testing.T) {
	const n = 32
	r := rand.New(rand.NewPCG(13, 14))
	m0 := randF64(r, n*n) // (n, n) column-major
	for _, lib := range qrLibs(t) {
		for _, positive := range []bool{false, true} {
			q := append([]float64(nil), m0...)
			if err := lib.QRColMajor(n, n, q, n, positive, nil); err != nil {
				t.Fatal(err)
			}
			neg := 0
			for j := range n { // R_jj = Q(:,j) . M(:,j)
				var rjj float64
				for i := range n {
					rjj += q[j*n+i] * m0[j*n+i]
				}
				if rjj < 0 {
					neg++
				}
			}
			if positive && neg > 0 {
				t.Fatalf("%s positive: %d negative R_jj", lib.QRName(), neg)
			}
			if !positive && neg == 0 {
				t.Fatalf("%s unfixed: no negative R_jj among %d (the check cannot tell)", lib.QRName(), n)
			}
		}
	}
}

// TestQRColMajorErrors: n = 0 is a no-op and bad shapes are refused naming what is wrong.
func TestQRColMajorErrors(t *testing.T) {
	for _, lib := range qrLibs(t) {
		if err := lib.QRColMajor(4, 0, nil, 4, true, nil); err != nil {
			t.Fatalf("%s: n = 0: %v", lib.QRName(), err)
		}
		for _, c := range []struct {
			m, n, la, lda int
			want          string
		}{
			{2, 3, 6, 2, "m >= n"},
			{3, 3, 9, 2, "lda=2"},
			{3, 3, 8, 3, "a has 8 elements"},
		} {
			err := lib.QRColMajor(c.m, c.n, make([]float64, c.la), c.lda, false, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %+v: got %v, want an error containing %q", lib.QRName(), c, err, c.want)
			}
		}
	}
}
