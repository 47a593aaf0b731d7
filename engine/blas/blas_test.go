package blas

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// refGemm is the textbook triple loop in float64.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float32 {
	out := append([]float32(nil), c...)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// withOpenBLAS is gonum, plus OpenBLAS (also returned, nil when absent) when it loads; without it
// the test logs that it checks gonum's what alone.
func withOpenBLAS(t testing.TB, what string) ([]*Library, *Library) {
	t.Helper()
	lib, err := OpenOpenBLAS()
	if err != nil {
		t.Logf("OpenBLAS absent, testing gonum's %s only: %v", what, err)
		return []*Library{Gonum()}, nil
	}
	return []*Library{Gonum(), lib}, lib
}

func openblasOrSkip(t *testing.T) *Library {
	t.Helper()
	lib, err := OpenOpenBLAS()
	if err != nil {
		t.Skipf("no OpenBLAS on this machine: %v", err)
	}
	return lib
}

// TestSgemmMatchesReference checks every transpose combination with padded
// strides, alpha and beta, for OpenBLAS and for the gonum fallback, and that
// both agree with each other to round-off.
func TestSgemmMatchesReference(t *testing.T) {
	libs := []*Library{Gonum()}
	if lib, err := OpenOpenBLAS(); err == nil {
		libs = append(libs, lib)
	} else {
		t.Logf("OpenBLAS absent, testing gonum only: %v", err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 37, 29, 53
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
			lda, ldb, ldc := ac+3, bc+1, n+2
			a := randSlice(r, (ar-1)*lda+ac)
			b := randSlice(r, (br-1)*ldb+bc)
			c0 := randSlice(r, (m-1)*ldc+n)
			want := refGemm(tA, tB, m, n, k, 0.75, a, lda, b, ldb, -0.5, c0, ldc)
			var got [][]float32
			for _, lib := range libs {
				c := append([]float32(nil), c0...)
				lib.Sgemm(tA, tB, m, n, k, 0.75, a, lda, b, ldb, -0.5, c, ldc)
				for i := range want {
					// Sums of k=53 products of unit normals: 1e-4 absolute is ~100 ulps.
					if d := math.Abs(float64(c[i] - want[i])); d > 1e-4 {
						t.Fatalf("%s tA=%v tB=%v: c[%d]=%g want %g", lib.Name(), tA, tB, i, c[i], want[i])
					}
				}
				// Padding between rows of C must be untouched.
				for i := 0; i < m-1; i++ {
					for j := n; j < ldc; j++ {
						if c[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("%s wrote into C's row padding at (%d,%d)", lib.Name(), i, j)
						}
					}
				}
				got = append(got, c)
			}
			if len(got) == 2 {
				for i := range got[0] {
					if d := math.Abs(float64(got[0][i] - got[1][i])); d > 1e-4 {
						t.Fatalf("gonum and OpenBLAS differ at %d: %g vs %g", i, got[0][i], got[1][i])
					}
				}
			}
		}
	}
}

func TestSgemmZeroK(t *testing.T) {
	for _, lib := range []*Library{Gonum(), openblasOrSkip(t)} {
		c := []float32{1, 2, 3, 4}
		lib.Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 2, c, 2)
		for i, v := range []float32{2, 4, 6, 8} {
			if c[i] != v {
				t.Fatalf("%s: k=0 should scale C by beta: got %v", lib.Name(), c)
			}
		}
	}
}

func TestSgemmPanicsOnShortSlice(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(error).Error(), "A has 5 elements") {
			t.Fatalf("want panic naming A's length, got %v", r)
		}
	}()
	Gonum().Sgemm(false, false, 2, 2, 3, 1, make([]float32, 5), 3, make([]float32, 6), 2, 0, make([]float32, 4), 2)
}

func TestLoadChoosesImplementation(t *testing.T) {
	var w bytes.Buffer
	if lib := load("gonum", &w); lib.IsOpenBLAS() || w.Len() != 0 {
		t.Fatalf("GELOATTACK_BLAS=gonum: got %q, notice %q", lib.Name(), w.String())
	}
	w.Reset()
	lib := load("/nonexistent/libopenblas.so", &w)
	if lib.IsOpenBLAS() {
		t.Fatalf("missing library gave %q", lib.Name())
	}
	if n := strings.Count(w.String(), "\n"); n != 1 || !strings.Contains(w.String(), "gonum") {
		t.Fatalf("want a one-line notice naming the fallback, got %q", w.String())
	}
	w.Reset()
	if _, err := OpenOpenBLAS(); err == nil {
		lib := load("", &w)
		if !lib.IsOpenBLAS() || w.Len() != 0 {
			t.Fatalf("default load: got %q, notice %q", lib.Name(), w.String())
		}
		if !strings.Contains(lib.Name(), "OpenBLAS") {
			t.Errorf("name %q does not say OpenBLAS", lib.Name())
		}
		lib.SetThreads(1)
		if lib.Threads() != 1 {
			t.Errorf("Threads()=%d after SetThreads(1)", lib.Threads())
		}
	}
}

// Serial runs its calls single-threaded, nested and concurrently, and restores the thread count
// when the last returns; a symmetric eigendecomposition in it gives the same bits as on one thread
// whatever the count outside (LAPACK's dsytrd sums split by thread count otherwise).
func TestSerial(t *testing.T) {
	lib, err := OpenOpenBLAS()
	if err != nil {
		t.Skip(err)
	}
	prev := lib.Threads()
	defer lib.SetThreads(prev)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 200
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := rng.NormFloat64()
			a[i*n+j], a[j*n+i] = v, v
		}
	}
	eig := func() []float64 {
		g, w := slices.Clone(a), make([]float64, n)
		if err := lib.EigSym(n, g, n, w); err != nil {
			t.Fatal(err)
		}
		return append(w, g...)
	}
	lib.SetThreads(1)
	want := eig()
	for _, th := range []int{2, 3, 5} {
		lib.SetThreads(th)
		var got []float64
		lib.Serial(func() {
			lib.Serial(func() {
				if lib.Threads() != 1 {
					t.Errorf("threads %d inside Serial", lib.Threads())
				}
			})
			got = eig()
		})
		if lib.Threads() != th {
			t.Errorf("threads %d after Serial, want %d restored", lib.Threads(), th)
		}
		if !slices.EqualFunc(got, want, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }) {
			t.Errorf("EigSym in Serial with %d threads set outside differs from one thread", th)
		}
	}
}
