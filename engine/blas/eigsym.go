package blas

import (
	"fmt"
	"math"

	"github.com/ebitengine/purego"
	gblas "gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/gonum"
)

// The symmetric eigendecomposition and Gram product below serve the spectra of observed U
// (baselines/membership): at d = 4096 gonum's pure-Go U^T U and Dsyev took minutes on two
// cores. The LAPACK path runs OpenBLAS's Fortran dsyevd_ (divide and conquer: the fastest
// LAPACK driver when every eigenvector is wanted, and the one numpy's eigh uses; its 2n^2
// workspace is 268 MB at n = 4096); the fallback is gonum's Dsyev (QL/QR iteration).

// cblasDsyrk is cblas_dsyrk's C signature (32-bit blasint).
type cblasDsyrk func(order, uplo, trans int32, n, k int32, alpha float64, a *float64, lda int32, beta float64, c *float64, ldc int32)

// fortranSyevd is the signature of LAPACK's dsyevd_. Fortran passes every argument by
// reference; gfortran appends the lengths of the CHARACTER arguments (jobz, uplo) by value at
// the end, which are passed here so that the call matches the callee's frame exactly.
type fortranSyevd func(jobz, uplo *byte, n *int32, a *float64, lda *int32, w, work *float64, lwork *int32, iwork *int32, liwork, info *int32, jobzLen, uploLen uintptr)

// CBLAS enumerators for dsyrk (cblasRowMajor and the transpose ones are in openblas.go).
const cblasUpper = 121

// symEig computes every eigenpair of the symmetric row-major a: (n, n) with row stride lda:
// eigenvalues ascending into w: (n), eigenvectors into the columns of a.
type symEig func(n int, a []float64, lda int, w []float64) error

// gonumSymEig is gonum's pure-Go Dsyev, which reads a's upper triangle.
func gonumSymEig(n int, a []float64, lda int, w []float64) error {
	var impl gonum.Implementation
	var q [1]float64
	impl.Dsyev(lapack.EVCompute, gblas.Upper, n, a, lda, w, q[:], -1)
	work := make([]float64, max(1, int(q[0])))
	if !impl.Dsyev(lapack.EVCompute, gblas.Upper, n, a, lda, w, work, len(work)) {
		return fmt.Errorf("blas: gonum Dsyev (%d x %d) did not converge", n, n)
	}
	return nil
}

// gonumGram is gonum's row-major DSYRK into the upper triangle of c.
func gonumGram(transA bool, n, k int, a []float64, lda int, c []float64, ldc int) {
	var impl gonumblas.Implementation
	impl.Dsyrk(gblas.Upper, trans(transA), n, k, 1, a, lda, 0, c, ldc)
}

// lapackSymEig binds dsyevd_ from the opened library h; ok is false when it is missing.
func lapackSymEig(h uintptr) (symEig, bool) {
	s, err := purego.Dlsym(h, "dsyevd_")
	if err != nil {
		return nil, false
	}
	var syevd fortranSyevd
	purego.RegisterFunc(&syevd, s)
	return func(n int, a []float64, lda int, w []float64) error {
		// A row-major symmetric matrix read column-major is A^T = A, so the copy needs no
		// transposition; dsyevd_ reads its upper triangle (a's lower one, row-major: the
		// same numbers for a symmetric a). On return column j of the column-major c is
		// eigenvector j, i.e. row j read row-major: one transposition puts it in a's column j.
		c := make([]float64, n*n)
		for i := range n {
			copy(c[i*n:(i+1)*n], a[i*lda:i*lda+n])
		}
		jobz, uplo := byte('V'), byte('U')
		nn, ld := int32(n), int32(n)
		var q float64
		var qi int32
		lwork, liwork, info := int32(-1), int32(-1), int32(0)
		syevd(&jobz, &uplo, &nn, &c[0], &ld, &w[0], &q, &lwork, &qi, &liwork, &info, 1, 1) // workspace query
		if info != 0 {
			return fmt.Errorf("blas: dsyevd workspace query: info %d", info)
		}
		if q > math.MaxInt32 {
			return fmt.Errorf("blas: dsyevd (%d x %d): workspace %g exceeds 32-bit LAPACK indices", n, n, q)
		}
		work := make([]float64, max(1, int(q)))
		iwork := make([]int32, max(1, int(qi)))
		lwork, liwork = int32(len(work)), int32(len(iwork))
		syevd(&jobz, &uplo, &nn, &c[0], &ld, &w[0], &work[0], &lwork, &iwork[0], &liwork, &info, 1, 1)
		if info != 0 {
			return fmt.Errorf("blas: dsyevd (%d x %d): info %d", n, n, info)
		}
		transpose(a, lda, c, n, n, n)
		return nil
	}, true
}

// openblasGram binds cblas_dsyrk from h as a row-major Gram product into the upper triangle of
// c; ok is false when it is missing.
func openblasGram(h uintptr) (func(trans bool, n, k int, a []float64, lda int, c []float64, ldc int), bool) {
	s, err := purego.Dlsym(h, "cblas_dsyrk")
	if err != nil {
		return nil, false
	}
	var syrk cblasDsyrk
	purego.RegisterFunc(&syrk, s)
	return func(trans bool, n, k int, a []float64, lda int, c []float64, ldc int) {
		syrk(cblasRowMajor, cblasUpper, cblasT(trans), int32(n), int32(k), 1, &a[0], int32(lda), 0, &c[0], int32(ldc))
	}, true
}

// HasEigSym reports whether EigSym runs the library's LAPACK (dsyevd_) rather than gonum's
// pure-Go Dsyev.
func (l *Library) HasEigSym() bool { return l.eig != nil }

// EigSymName says which implementation EigSym uses, e.g. "LAPACK dsyevd (libopenblas.so.0)" or
// "gonum Dsyev (pure Go)".
func (l *Library) EigSymName() string {
	if l.eig != nil {
		return "LAPACK dsyevd (" + l.path + ")"
	}
	return "gonum Dsyev (pure Go)"
}

// EigSym computes every eigenvalue and eigenvector of the symmetric row-major matrix
// A: (n, n), stored in a with row stride lda. On return w: (n) holds the eigenvalues in
// ascending order and a holds V: (n, n) with orthonormal columns, A = V diag(w) V^T, column j
// the eigenvector of w[j] (its sign is the implementation's choice). Only the upper triangle of
// A is read on the gonum path, the lower one on the LAPACK path: pass a full symmetric matrix.
// Padding between a's rows is left alone.
func (l *Library) EigSym(n int, a []float64, lda int, w []float64) error {
	if n < 0 {
		return fmt.Errorf("blas: EigSym: n=%d < 0", n)
	}
	if n == 0 {
		return nil
	}
	if err := checkMat("EigSym", "a", n, n, len(a), lda); err != nil {
		return err
	}
	if len(w) < n {
		return fmt.Errorf("blas: EigSym: w has %d elements, want %d", len(w), n)
	}
	eig := l.eig
	if eig == nil {
		eig = gonumSymEig
	}
	return eig(n, a, lda, w[:n])
}

// Gram computes the symmetric C = op(A) op(A)^T in float64 with DSYRK (half a GEMM's work), and
// fills both triangles. Without trans, A: (n, k) and C = A A^T; with trans, A: (k, n) and
// C = A^T A. a and c are row-major with row strides lda and ldc; C: (n, n). It panics when a
// slice is too short for the shapes given, as Dgemm does.
func (l *Library) Gram(transA bool, n, k int, a []float64, lda int, c []float64, ldc int) {
	ar, ac := n, k
	if transA {
		ar, ac = k, n
	}
	if err := checkMat("Gram", "a", ar, ac, len(a), lda); err != nil {
		panic(err)
	}
	if err := checkMat("Gram", "c", n, n, len(c), ldc); err != nil {
		panic(err)
	}
	if n == 0 {
		return
	}
	if k == 0 {
		scaleRows(c, n, n, ldc, 0)
		return
	}
	gram := l.gram
	if gram == nil {
		gram = gonumGram
	}
	gram(transA, n, k, a, lda, c, ldc)
	for i := 1; i < n; i++ { // lower triangle from the upper one
		for j := range i {
			c[i*ldc+j] = c[j*ldc+i]
		}
	}
}

// EigSym is Default().EigSym: eigenvalues ascending into w, eigenvectors into a's columns.
func EigSym(n int, a []float64, lda int, w []float64) error {
	return Default().EigSym(n, a, lda, w)
}

// Gram is Default().Gram: C = A A^T (trans false) or A^T A (trans true), both triangles filled.
func Gram(transA bool, n, k int, a []float64, lda int, c []float64, ldc int) {
	Default().Gram(transA, n, k, a, lda, c, ldc)
}
