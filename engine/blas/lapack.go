package blas

import (
	"fmt"
	"math"

	"github.com/ebitengine/purego"
	gonumblas "gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/lapack/gonum"
)

// The double-precision routines below serve the trusted side's float64 work (drawing Haar and
// conditioned mixing matrices): DGEMM, and a row-major Householder QR whose LAPACK path runs
// OpenBLAS's Fortran dgeqrf_/dorgqr_ (the distribution builds have no LAPACKE) and whose fallback
// is gonum's pure-Go Dgeqrf/Dorgqr.

// cblasDgemm is cblas_dgemm's C signature (32-bit blasint, as for cblasSgemm).
type cblasDgemm func(order, transA, transB int32, m, n, k int32, alpha float64, a *float64, lda int32, b *float64, ldb int32, beta float64, c *float64, ldc int32)

// fortranGeqrf is the signature of LAPACK's dgeqrf_ (Fortran: every argument by reference).
type fortranGeqrf func(m, n *int32, a *float64, lda *int32, tau, work *float64, lwork, info *int32)

// fortranOrgqr is the signature of LAPACK's dorgqr_.
type fortranOrgqr func(m, n, k *int32, a *float64, lda *int32, tau, work *float64, lwork, info *int32)

// factored is one QR between LAPACK's two steps: the factorisation is done, R can be read, and
// Q has not been formed yet.
type factored interface {
	// R is R(i, j) for i <= j.
	R(i, j int) float64
	// FormQ writes Q: (m, n) into the caller's row-major matrix, replacing M.
	FormQ() error
}

// rowQR starts the QR of the row-major matrix a: (m, n) with row stride lda (m >= n >= 1).
type rowQR func(m, n int, a []float64, lda int) (factored, error)

// gonumFactored is a QR in gonum's row-major LAPACK, done in place: R sits in the upper triangle
// of a, the reflectors below it.
type gonumFactored struct {
	m, n, lda int
	a, tau    []float64
}

func (g *gonumFactored) R(i, j int) float64 { return g.a[i*g.lda+j] }

func (g *gonumFactored) FormQ() error {
	var impl gonum.Implementation
	var q [1]float64
	impl.Dorgqr(g.m, g.n, g.n, g.a, g.lda, g.tau, q[:], -1)
	work := make([]float64, max(1, int(q[0])))
	impl.Dorgqr(g.m, g.n, g.n, g.a, g.lda, g.tau, work, len(work))
	return nil
}

// gonumQR is gonum's pure-Go QR.
func gonumQR(m, n int, a []float64, lda int) (factored, error) {
	var impl gonum.Implementation
	g := &gonumFactored{m: m, n: n, lda: lda, a: a, tau: make([]float64, n)}
	var q [1]float64
	impl.Dgeqrf(m, n, a, lda, g.tau, q[:], -1)
	work := make([]float64, max(1, int(q[0])))
	impl.Dgeqrf(m, n, a, lda, g.tau, work, len(work))
	return g, nil
}

// gonumDgemm is gonum's row-major DGEMM.
func gonumDgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	var impl gonumblas.Implementation
	impl.Dgemm(trans(transA), trans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// lapackFactored is a QR in Fortran LAPACK, done on a column-major copy w: (m, n), ld m, of
// the caller's row-major a. The copy costs two transpositions (O(mn)), which pay for
// themselves: on this repository's 2-core machine dgeqrf_+dorgqr_ of n = 2048 took 0.62 s
// against 0.80 s for the transposition-free route through dgelqf_+dorglq_ of M^T.
type lapackFactored struct {
	m, n, lda int
	a, w, tau []float64
	orgqr     fortranOrgqr
}

func (f *lapackFactored) R(i, j int) float64 { return f.w[j*f.m+i] }

func (f *lapackFactored) FormQ() error {
	m, n, ld := int32(f.m), int32(f.n), int32(f.m)
	var q float64
	lwork, info := int32(-1), int32(0)
	f.orgqr(&m, &n, &n, &f.w[0], &ld, &f.tau[0], &q, &lwork, &info) // workspace query
	if info != 0 {
		return fmt.Errorf("blas: dorgqr workspace query: info %d", info)
	}
	work := make([]float64, max(1, int(q)))
	lwork = int32(len(work))
	f.orgqr(&m, &n, &n, &f.w[0], &ld, &f.tau[0], &work[0], &lwork, &info)
	if info != 0 {
		return fmt.Errorf("blas: dorgqr (%d x %d): info %d", f.m, f.n, info)
	}
	transpose(f.a, f.lda, f.w, f.m, f.n, f.m) // Q^T stored column-major is Q row-major
	return nil
}

// lapackRoutines are the Fortran QR routines bound from a library, for the column-major QR
// (QRColMajor) that calls them on the caller's storage directly.
type lapackRoutines struct {
	geqrf fortranGeqrf
	orgqr fortranOrgqr
}

// lapackQR binds dgeqrf_/dorgqr_ from the opened library h: the row-major QR and the raw
// routines; ok is false when either is missing.
func lapackQR(h uintptr) (rowQR, *lapackRoutines, bool) {
	fs, err1 := purego.Dlsym(h, "dgeqrf_")
	gs, err2 := purego.Dlsym(h, "dorgqr_")
	if err1 != nil || err2 != nil {
		return nil, nil, false
	}
	var geqrf fortranGeqrf
	var orgqr fortranOrgqr
	purego.RegisterFunc(&geqrf, fs)
	purego.RegisterFunc(&orgqr, gs)
	raw := &lapackRoutines{geqrf: geqrf, orgqr: orgqr}
	return func(m, n int, a []float64, lda int) (factored, error) {
		f := &lapackFactored{m: m, n: n, lda: lda, a: a, w: make([]float64, m*n), tau: make([]float64, n), orgqr: orgqr}
		transpose(f.w, m, a, lda, m, n) // w: (n, m) row-major = (m, n) column-major
		mm, nn, ld := int32(m), int32(n), int32(m)
		var q float64
		lwork, info := int32(-1), int32(0)
		geqrf(&mm, &nn, &f.w[0], &ld, &f.tau[0], &q, &lwork, &info) // workspace query
		if info != 0 {
			return nil, fmt.Errorf("blas: dgeqrf workspace query: info %d", info)
		}
		work := make([]float64, max(1, int(q)))
		lwork = int32(len(work))
		geqrf(&mm, &nn, &f.w[0], &ld, &f.tau[0], &work[0], &lwork, &info)
		if info != 0 {
			return nil, fmt.Errorf("blas: dgeqrf (%d x %d): info %d", m, n, info)
		}
		return f, nil
	}, raw, true
}

// transpose writes the transpose of src: (rows, cols), row stride lds, into dst: (cols, rows),
// row stride ldd, in 32 x 32 tiles so that both sides stay in cache.
func transpose(dst []float64, ldd int, src []float64, lds int, rows, cols int) {
	const tile = 32
	for i0 := 0; i0 < rows; i0 += tile {
		i1 := min(i0+tile, rows)
		for j0 := 0; j0 < cols; j0 += tile {
			j1 := min(j0+tile, cols)
			for i := i0; i < i1; i++ {
				row := src[i*lds+j0 : i*lds+j1]
				for j, v := range row {
					dst[(j0+j)*ldd+i] = v
				}
			}
		}
	}
}

// openblasDgemm binds cblas_dgemm from h; ok is false when it is missing.
func openblasDgemm(h uintptr) (func(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int), bool) {
	s, err := purego.Dlsym(h, "cblas_dgemm")
	if err != nil {
		return nil, false
	}
	var gemm cblasDgemm
	purego.RegisterFunc(&gemm, s)
	return func(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
		gemm(cblasRowMajor, cblasT(transA), cblasT(transB), int32(m), int32(n), int32(k),
			alpha, &a[0], int32(lda), &b[0], int32(ldb), beta, &c[0], int32(ldc))
	}, true
}

// HasLAPACK reports whether QR runs the library's LAPACK (OpenBLAS's dgeqrf_/dorgqr_) rather
// than gonum's pure-Go fallback.
func (l *Library) HasLAPACK() bool { return l.lapack }

// QRName says which implementation QR uses, e.g. "LAPACK dgeqrf/dorgqr (libopenblas.so.0)" or
// "gonum Dgeqrf/Dorgqr (pure Go)".
func (l *Library) QRName() string {
	if l.lapack {
		return "LAPACK dgeqrf/dorgqr (" + l.path + ")"
	}
	return "gonum Dgeqrf/Dorgqr (pure Go)"
}

// Dgemm computes C = alpha * op(A) * op(B) + beta * C in float64, row-major, with the
// conventions of Sgemm: op(A): (m, k), op(B): (k, n), C: (m, n). It panics when a slice is too
// short for the shapes given.
func (l *Library) Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if err := checkGemm("Dgemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		panic(err)
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		// Empty product: C = beta*C (gonum demands non-empty A and B).
		scaleRows(c, m, n, ldc, beta)
		return
	}
	gemm := l.dgemm
	if gemm == nil {
		gemm = gonumDgemm
	}
	gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// QR computes the thin QR decomposition M = Q R of the row-major m x n matrix M (m >= n >= 0) in
// float64 by Householder reflections. a: (m, n) with row stride lda holds M on entry and Q
// (orthonormal columns) on return. r: (n, n) with row stride ldr receives R, upper triangular
// with zeros below the diagonal; r may be nil when R is not needed.
//
// With positive set, column j of Q and row j of R are multiplied by sign(R_jj) (a zero R_jj
// counts as positive), giving the decomposition with R_jj >= 0, which is unique for a full-rank
// M: for a standard Gaussian square M this Q is Haar-distributed. Without it R_jj keeps the sign
// the reflectors give it (LAPACK chooses R_jj = -sign(M_jj) ||x||, which biases Q).
//
// The work runs on LAPACK when HasLAPACK, else on gonum; both use the library's threads.
func (l *Library) QR(m, n int, a []float64, lda int, r []float64, ldr int, positive bool) error {
	if err := checkQR(m, n, len(a), lda, r, ldr); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	qr := l.qr
	if qr == nil {
		qr = gonumQR
	}
	f, err := qr(m, n, a, lda)
	if err != nil {
		return err
	}
	sign := make([]float64, n) // sign: (n), sign(R_jj) when positive, else 1
	flip := false
	for j := range n {
		sign[j] = 1
		if positive && f.R(j, j) < 0 {
			sign[j], flip = -1, true
		}
	}
	if r != nil {
		for i := range n {
			row := r[i*ldr : i*ldr+n]
			clear(row[:i])
			for j := i; j < n; j++ {
				row[j] = sign[i] * f.R(i, j)
			}
		}
	}
	if err := f.FormQ(); err != nil {
		return err
	}
	if flip {
		for i := range m {
			row := a[i*lda : i*lda+n]
			for j, s := range sign {
				row[j] *= s
			}
		}
	}
	return nil
}

// checkQRInput validates the sizes, stride and slice length of an m x n QR input stored row-major
// (the stride runs over rows of n) or column-major (over columns of m); op names the routine.
func checkQRInput(op string, m, n, la, lda int, colMajor bool) error {
	if n < 0 || m < n {
		return fmt.Errorf("blas: %s: want m >= n >= 0, got m=%d n=%d", op, m, n)
	}
	if m > math.MaxInt32 || lda > math.MaxInt32 {
		return fmt.Errorf("blas: %s: m=%d, lda=%d exceed 32-bit LAPACK indices", op, m, lda)
	}
	// lines: the stored lines (rows or columns), each lda apart and width long.
	lines, width, what, layout := m, n, "columns", ""
	if colMajor {
		lines, width, what, layout = n, m, "rows", " column-major"
	}
	if lda < max(1, width) {
		return fmt.Errorf("blas: %s: lda=%d < %s %d", op, lda, what, width)
	}
	if n == 0 {
		return nil
	}
	if need := (lines-1)*lda + width; la < need {
		return fmt.Errorf("blas: %s: a has %d elements, (%d x %d%s, ld %d) needs %d", op, la, m, n, layout, lda, need)
	}
	return nil
}

// checkQR validates QR's sizes, strides and slice lengths.
func checkQR(m, n, la, lda int, r []float64, ldr int) error {
	if err := checkQRInput("QR", m, n, la, lda, false); err != nil || n == 0 {
		return err
	}
	if r != nil {
		if ldr < n {
			return fmt.Errorf("blas: QR: ldr=%d < columns %d", ldr, n)
		}
		if need := (n-1)*ldr + n; len(r) < need {
			return fmt.Errorf("blas: QR: r has %d elements, (%d x %d, ld %d) needs %d", len(r), n, n, ldr, need)
		}
	}
	return nil
}

// Dgemm is Default().Dgemm: float64 C = alpha * op(A) * op(B) + beta * C, row-major.
func Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	Default().Dgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// QR is Default().QR: the row-major float64 QR decomposition, Q in a, R in r (nil: not wanted).
func QR(m, n int, a []float64, lda int, r []float64, ldr int, positive bool) error {
	return Default().QR(m, n, a, lda, r, ldr, positive)
}

// HasLAPACK is Default().HasLAPACK().
func HasLAPACK() bool { return Default().HasLAPACK() }
