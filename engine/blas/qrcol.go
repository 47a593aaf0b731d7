package blas

import (
	"fmt"
)

// QRWork is the reusable scratch of QRColMajor: LAPACK's tau and work arrays and the signs of
// R's diagonal (and, on the gonum path, a row-major copy). One goroutine's calls may share one;
// the zero value is ready. Reusing it keeps a per-example QR free of allocations.
type QRWork struct {
	tau, work, sign []float64
	rows            []float64 // gonum path: (m, n) row-major copy of the column-major input
}

// grow returns buf resized to n, reusing its storage when large enough.
func grow(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// QRColMajor overwrites the column-major m x n matrix M (m >= n >= 0; column j is
// a[j*lda : j*lda+m], lda >= m) with the Q of its thin Householder QR M = Q R, in float64.
// It is QR for column-major storage, with no copy on the LAPACK path: dgeqrf_ and dorgqr_ run
// on a itself, so the Fortran routines see the layout they were written for.
//
// positive is as for QR: column j of Q is multiplied by sign(R_jj) (zero counts as positive),
// which for a standard Gaussian square M makes Q Haar-distributed. R itself is not returned.
// ws holds the scratch between calls (nil: allocated for this call). Without LAPACK the matrix
// is transposed to row-major, factored by gonum and transposed back.
func (l *Library) QRColMajor(m, n int, a []float64, lda int, positive bool, ws *QRWork) error {
	if err := checkQRInput("QRColMajor", m, n, len(a), lda, true); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if ws == nil {
		ws = new(QRWork)
	}
	if l.lapackRaw == nil {
		// Row-major (m, n) is the transpose of the column-major storage.
		ws.rows = grow(ws.rows, m*n)
		transpose(ws.rows, n, a, lda, n, m)
		if err := l.QR(m, n, ws.rows, n, nil, 0, positive); err != nil {
			return err
		}
		transpose(a, lda, ws.rows, n, m, n)
		return nil
	}
	f := l.lapackRaw
	mm, nn, ld := int32(m), int32(n), int32(lda)
	ws.tau = grow(ws.tau, n)
	// Workspace: the larger of the two routines' optimal sizes, kept for the next call.
	var qf, qo float64
	lwork, info := int32(-1), int32(0)
	f.geqrf(&mm, &nn, &a[0], &ld, &ws.tau[0], &qf, &lwork, &info)
	if info != 0 {
		return fmt.Errorf("blas: dgeqrf workspace query (%d x %d): info %d", m, n, info)
	}
	f.orgqr(&mm, &nn, &nn, &a[0], &ld, &ws.tau[0], &qo, &lwork, &info)
	if info != 0 {
		return fmt.Errorf("blas: dorgqr workspace query (%d x %d): info %d", m, n, info)
	}
	ws.work = grow(ws.work, max(1, int(qf), int(qo)))
	lwork = int32(len(ws.work))
	f.geqrf(&mm, &nn, &a[0], &ld, &ws.tau[0], &ws.work[0], &lwork, &info)
	if info != 0 {
		return fmt.Errorf("blas: dgeqrf (%d x %d): info %d", m, n, info)
	}
	// sign: (n), sign(R_jj) when positive, else 1; R_jj sits on a's diagonal until dorgqr.
	ws.sign = grow(ws.sign, n)
	flip := false
	for j := range n {
		ws.sign[j] = 1
		if positive && a[j*lda+j] < 0 {
			ws.sign[j], flip = -1, true
		}
	}
	f.orgqr(&mm, &nn, &nn, &a[0], &ld, &ws.tau[0], &ws.work[0], &lwork, &info)
	if info != 0 {
		return fmt.Errorf("blas: dorgqr (%d x %d): info %d", m, n, info)
	}
	if flip {
		for j, s := range ws.sign {
			if s < 0 {
				col := a[j*lda : j*lda+m]
				for i := range col {
					col[i] = -col[i]
				}
			}
		}
	}
	return nil
}
