package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// qrLibs is gonum's QR, plus OpenBLAS's when it loads (it must then bind LAPACK: the
// distribution builds export dgeqrf_/dorgqr_).
func qrLibs(t testing.TB) []*Library {
	t.Helper()
	libs, lib := withOpenBLAS(t, "QR")
	if lib != nil && !lib.HasLAPACK() {
		t.Logf("%s exports no dgeqrf_/dorgqr_: QR falls back to gonum", lib.Name())
	}
	return libs
}

func randF64(r *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = r.NormFloat64()
	}
	return s
}

// checkQRResult checks Q^T Q = I to 1e-12, Q R = M to 1e-10 relative (Frobenius), R upper
// triangular, and with positive a non-negative diagonal of R.
// q: (m, n) with stride ldq, r: (n, n), m0: (m, n) with stride ldq.
func checkQRResult(t *testing.T, what string, m, n int, q []float64, ldq int, r, m0 []float64, positive bool) {
	t.Helper()
	for i := range n {
		for j := range n {
			var s float64
			for k := range m {
				s += q[k*ldq+i] * q[k*ldq+j]
			}
			if i == j {
				s--
			}
			if math.Abs(s) > 1e-12 {
				t.Fatalf("%s: (Q^T Q - I)[%d,%d] = %g", what, i, j, s)
			}
		}
	}
	var num, den float64
	for i := range m {
		for j := range n {
			var s float64
			for k := range n {
				s += q[i*ldq+k] * r[k*n+j]
			}
			d := s - m0[i*ldq+j]
			num += d * d
			den += m0[i*ldq+j] * m0[i*ldq+j]
		}
	}
	if rel := math.Sqrt(num / den); rel > 1e-10 {
		t.Fatalf("%s: ||QR - M|| / ||M|| = %g", what, rel)
	}
	for i := range n {
		for j := range i {
			if r[i*n+j] != 0 {
				t.Fatalf("%s: R[%d,%d] = %g below the diagonal", what, i, j, r[i*n+j])
			}
		}
		if positive && r[i*n+i] < 0 {
			t.Fatalf("%s: R[%d,%d] = %g < 0 with positive set", what, i, i, r[i*n+i])
		}
	}
}

// TestQRMatchesGonum factors square and tall matrices with padded strides on LAPACK and on
// gonum: each result is a QR of M, and with the sign fix (the unique R_jj > 0 form) the two
// implementations give the same Q and R to round-off.
func TestQRMatchesGonum(t *testing.T) {
	libs := qrLibs(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ m, n, ld int }{{1, 1, 1}, {5, 5, 5}, {37, 37, 40}, {64, 64, 64}, {50, 31, 33}, {97, 64, 64}} {
		m0 := randF64(r, (s.m-1)*s.ld+s.n)
		for _, positive := range []bool{false, true} {
			var qs, rs [][]float64
			for _, lib := range libs {
				what := fmt.Sprintf("%s %dx%d ld %d positive=%v", lib.QRName(), s.m, s.n, s.ld, positive)
				q := append([]float64(nil), m0...)
				rr := make([]float64, s.n*s.n)
				if err := lib.QR(s.m, s.n, q, s.ld, rr, s.n, positive); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				checkQRResult(t, what, s.m, s.n, q, s.ld, rr, m0, positive)
				// Padding between rows of a is untouched.
				for i := 0; i < s.m-1; i++ {
					for j := s.n; j < s.ld; j++ {
						if q[i*s.ld+j] != m0[i*s.ld+j] {
							t.Fatalf("%s wrote into a's row padding at (%d,%d)", what, i, j)
						}
					}
				}
				qs, rs = append(qs, q), append(rs, rr)
			}
			if len(qs) == 2 && positive {
				for i := range qs[0] {
					if d := math.Abs(qs[0][i] - qs[1][i]); d > 1e-10 {
						t.Fatalf("%dx%d: gonum and LAPACK Q differ at %d: %g vs %g", s.m, s.n, i, qs[0][i], qs[1][i])
					}
				}
				for i := range rs[0] {
					if d := math.Abs(rs[0][i] - rs[1][i]); d > 1e-10*(1+math.Abs(rs[0][i])) {
						t.Fatalf("%dx%d: gonum and LAPACK R differ at %d: %g vs %g", s.m, s.n, i, rs[0][i], rs[1][i])
					}
				}
			}
		}
	}
}

// TestQRNilRAndErrors: R may be omitted, n = 0 is a no-op, and bad shapes are refused naming
// what is wrong.
func TestQRNilRAndErrors(t *testing.T) {
	for _, lib := range qrLibs(t) {
		a := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5}
		if err := lib.QR(3, 3, a, 3, nil, 0, true); err != nil {
			t.Fatalf("%s: nil r: %v", lib.QRName(), err)
		}
		if err := lib.QR(4, 0, nil, 1, nil, 0, true); err != nil {
			t.Fatalf("%s: n = 0: %v", lib.QRName(), err)
		}
		for _, c := range []struct {
			m, n, la, lda, lr, ldr int
			want                   string
		}{
			{2, 3, 6, 3, 0, 0, "m >= n"},
			{3, 3, 9, 2, 0, 0, "lda=2"},
			{3, 3, 8, 3, 0, 0, "a has 8 elements"},
			{3, 3, 9, 3, 8, 3, "r has 8 elements"},
			{3, 3, 9, 3, 9, 2, "ldr=2"},
		} {
			var rr []float64
			if c.lr > 0 {
				rr = make([]float64, c.lr)
			}
			err := lib.QR(c.m, c.n, make([]float64, c.la), c.lda, rr, c.ldr, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %+v: got %v, want an error containing %q", lib.QRName(), c, err, c.want)
			}
		}
	}
}

// TestDgemmMatchesReference checks the float64 GEMM of both implementations on every transpose
// combination with padded strides against a triple loop.
func TestDgemmMatchesReference(t *testing.T) {
	libs := []*Library{Gonum()}
	if lib, err := OpenOpenBLAS(); err == nil {
		libs = append(libs, lib)
	}
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k = 13, 11, 17
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			ar, ac := m, k
			if tA {
				ar, ac = k, m
			}
			br, bc := k, n
			if tB {
				br, bc = n, k
			}
			lda, ldb, ldc := ac+2, bc+1, n+3
			a := randF64(r, (ar-1)*lda+ac)
			b := randF64(r, (br-1)*ldb+bc)
			c0 := randF64(r, (m-1)*ldc+n)
			for _, lib := range libs {
				c := append([]float64(nil), c0...)
				lib.Dgemm(tA, tB, m, n, k, 0.5, a, lda, b, ldb, 2, c, ldc)
				for i := range m {
					for j := range n {
						var s float64
						for p := range k {
							var av, bv float64
							if tA {
								av = a[p*lda+i]
							} else {
								av = a[i*lda+p]
							}
							if tB {
								bv = b[j*ldb+p]
							} else {
								bv = b[p*ldb+j]
							}
							s += av * bv
						}
						want := 0.5*s + 2*c0[i*ldc+j]
						if d := math.Abs(c[i*ldc+j] - want); d > 1e-12*(1+math.Abs(want)) {
							t.Fatalf("%s tA=%v tB=%v: c[%d,%d]=%g want %g", lib.Name(), tA, tB, i, j, c[i*ldc+j], want)
						}
					}
					for j := n; j < ldc && i < m-1; j++ {
						if c[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("%s wrote into C's row padding at (%d,%d)", lib.Name(), i, j)
						}
					}
				}
			}
		}
	}
}

// BenchmarkQR times the square QR with the sign fix (a Haar draw's factorisation) on LAPACK
// and on gonum at the thread count given by the library's default (GOMAXPROCS).
func BenchmarkQR(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, lib := range qrLibs(b) {
		lib.SetThreads(0)
		impl := "gonum"
		if lib.HasLAPACK() {
			impl = "lapack"
		}
		for _, n := range []int{256, 512, 1024, 2048} {
			m0 := randF64(r, n*n)
			a := make([]float64, n*n)
			b.Run(fmt.Sprintf("%s/n=%d", impl, n), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for b.Loop() {
					copy(a, m0)
					if err := lib.QR(n, n, a, n, nil, 0, true); err != nil {
						b.Fatal(err)
					}
				}
				// dgeqrf + dorgqr: 4/3 n^3 + 4/3 n^3 flops.
				report(b, 8.0/3*float64(n)*float64(n)*float64(n), cpu0)
				b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
			})
		}
	}
}
