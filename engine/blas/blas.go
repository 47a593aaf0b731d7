// Package blas gives row-major single-precision GEMM from OpenBLAS, loaded at
// run time through purego so that binaries stay CGO_ENABLED=0, with a pure-Go
// fallback (gonum) when no OpenBLAS can be opened. For the trusted side's
// float64 work it also gives DGEMM, a Gram product (DSYRK), a row-major
// Householder QR and a symmetric eigendecomposition (OpenBLAS's LAPACK when
// exported, else gonum's).
//
// The package-level functions use one library chosen on first use: the
// environment variable GELOATTACK_BLAS=gonum forces the fallback,
// GELOATTACK_BLAS=/path/to/lib.so names the library to open; otherwise
// libopenblas.so.0, libopenblas.so and libblas.so.3 are tried in that order.
// On CPUs with AVX-512 that OpenBLAS does not recognise, its AVX-512 kernels
// are selected unless OPENBLAS_CORETYPE is set (see OpenOpenBLAS).
package blas

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
)

// Library is one loaded GEMM implementation. Its methods are safe for
// concurrent use.
type Library struct {
	name   string
	path   string // shared object opened, empty for gonum
	sgemm  func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	setThr func(n int)
	// dgemm is the float64 GEMM and qr the float64 QR (nil: gonum's); lapack says
	// qr is the library's LAPACK.
	dgemm  func(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int)
	qr     rowQR
	lapack bool
	// lapackRaw are the Fortran routines behind qr (nil without LAPACK), for QRColMajor.
	lapackRaw *lapackRoutines
	// eig is LAPACK's symmetric eigensolver and gram the float64 DSYRK (nil: gonum's).
	eig     symEig
	gram    func(transA bool, n, k int, a []float64, lda int, c []float64, ldc int)
	mu      sync.Mutex
	threads int
	// serial counts the Serial calls running; saved is the thread count they restore.
	serial, saved int
}

// Name says which implementation is loaded, e.g. "OpenBLAS 0.3.21 ... (libopenblas.so.0)" or "gonum".
func (l *Library) Name() string { return l.name }

// IsOpenBLAS reports whether the library is a dynamically loaded OpenBLAS
// (false for the gonum fallback).
func (l *Library) IsOpenBLAS() bool { return l.path != "" }

// Threads is the thread count last set with SetThreads (for gonum: the
// GOMAXPROCS it parallelises over).
func (l *Library) Threads() int {
	if l.setThr == nil {
		return runtime.GOMAXPROCS(0)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.threads
}

// SetThreads sets the number of threads one GEMM call may use (OpenBLAS's
// openblas_set_num_threads; the setting is process-wide in OpenBLAS). n < 1
// means runtime.GOMAXPROCS(0). It is a no-op for gonum, which parallelises
// over GOMAXPROCS by itself.
func (l *Library) SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	if l.setThr == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setThr(n)
	l.threads = n
}

// Serial runs fn with the library's calls single-threaded (OpenBLAS's thread count 1, restored
// when the last of the Serial calls running returns; they may nest and run concurrently). A
// threaded OpenBLAS call splits its work, and for level-2 kernels, DGEMM and LAPACK its sums, by
// the thread count, so its bits follow GOMAXPROCS; in Serial they are those of one thread on any
// machine. A call outside Serial that sets the thread count meanwhile defeats it.
func (l *Library) Serial(fn func()) {
	if l.setThr == nil {
		fn()
		return
	}
	l.mu.Lock()
	if l.serial == 0 {
		l.saved = l.threads
		l.setThr(1)
		l.threads = 1
	}
	l.serial++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.serial--; l.serial == 0 {
			l.setThr(l.saved)
			l.threads = l.saved
		}
	}()
	fn()
}

// Sgemm computes C = alpha * op(A) * op(B) + beta * C for row-major matrices,
// op(X) = X^T when the flag is set. op(A): (m, k), op(B): (k, n), C: (m, n);
// lda, ldb, ldc are the row strides of the matrices as stored. It panics when
// a slice is too short for the shapes given (a programming error: the C
// library would otherwise read or write out of bounds).
func (l *Library) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if err := checkGemm("Sgemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		panic(err)
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		// Empty product: C = beta*C. Done here because gonum demands
		// non-empty A and B even when k is 0.
		scaleRows(c, m, n, ldc, beta)
		return
	}
	l.sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkGemm validates GEMM shapes, strides and slice lengths; op names the routine in errors.
func checkGemm(op string, transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("blas: %s: negative size m=%d n=%d k=%d", op, m, n, k)
	}
	// Stored shapes: A is (m, k) or (k, m) when transposed; likewise B.
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkMat(op, "A", ar, ac, la, lda); err != nil {
		return err
	}
	if err := checkMat(op, "B", br, bc, lb, ldb); err != nil {
		return err
	}
	return checkMat(op, "C", m, n, lc, ldc)
}

func checkMat(op, name string, rows, cols, length, ld int) error {
	if rows > math.MaxInt32 || cols > math.MaxInt32 || ld > math.MaxInt32 {
		return fmt.Errorf("blas: %s: %s (%d x %d, ld %d) exceeds 32-bit BLAS indices", op, name, rows, cols, ld)
	}
	if ld < max(1, cols) {
		return fmt.Errorf("blas: %s: ld%s=%d < columns %d", op, name, ld, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ld + cols; length < need {
		return fmt.Errorf("blas: %s: %s has %d elements, (%d x %d, ld %d) needs %d", op, name, length, rows, cols, ld, need)
	}
	return nil
}

var (
	defaultOnce sync.Once
	defaultLib  *Library
)

// Default returns the process-wide library, loading it on first use (see the
// package comment for how it is chosen). If OpenBLAS cannot be opened it
// prints one line to stderr and returns the gonum fallback.
func Default() *Library {
	defaultOnce.Do(func() { defaultLib = load(os.Getenv("GELOATTACK_BLAS"), os.Stderr) })
	return defaultLib
}

// load chooses a library as the package comment describes; choice is the
// value of GELOATTACK_BLAS, notices go to w.
func load(choice string, w io.Writer) *Library {
	if choice == "gonum" {
		return Gonum()
	}
	var paths []string
	if choice != "" {
		paths = []string{choice}
	}
	lib, err := OpenOpenBLAS(paths...)
	if err != nil {
		fmt.Fprintf(w, "geloattack: OpenBLAS not loaded (%v); using gonum's pure-Go SGEMM (much slower)\n", err)
		return Gonum()
	}
	lib.SetThreads(0)
	return lib
}

// Sgemm is Default().Sgemm: C = alpha * op(A) * op(B) + beta * C, row-major,
// op(A): (m, k), op(B): (k, n), C: (m, n).
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	Default().Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Name is Default().Name(): which implementation the package-level Sgemm uses.
func Name() string { return Default().Name() }

// SetThreads is Default().SetThreads(n).
func SetThreads(n int) { Default().SetThreads(n) }

// Threads is Default().Threads().
func Threads() int { return Default().Threads() }

// scaleRows sets C = beta*C for the (m, n) matrix C with row stride ldc (beta 0 writes zeros, so
// NaN in C does not survive, as BLAS specifies).
func scaleRows[T float32 | float64](c []T, m, n, ldc int, beta T) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}
