package baselines

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Separation is the output of a blind source separation of U (n mixtures, T samples).
type Separation struct {
	// Sources are the estimated sources, (m, T), m <= n: Unmixing * U.
	Sources *mat.Dense
	// Unmixing is (m, n). It acts on U as observed; the centring that whitening needs is folded
	// into the estimation, not into this matrix, so that sources keep the rows' means as H does.
	Unmixing *mat.Dense
	// Iterations counts the method's iterations: fixed-point steps (FastICA), Jacobi sweeps (JADE's
	// full form, SOBI), rounds (JADE's slice form); 0 for closed forms (FOBI).
	Iterations int
	// Converged is false when the method stopped at its iteration limit.
	Converged bool
}

// whitened is U centred and whitened by PCA: z = w (u - mean 1^T) with z z^T / T = I.
type whitened struct {
	z *mat.Dense // (m, T)
	w *mat.Dense // (m, n) whitening matrix
}

// eigenRelTol drops principal components whose variance is below this fraction of the largest:
// they are round-off of a rank-deficient U, and whitening would blow them up into noise.
const eigenRelTol = 1e-12

// whiten centres every row of u (n, T) and whitens it onto its m leading principal components
// (m = 0: every component above round-off). It fails when fewer than m components carry variance.
func whiten(u *mat.Dense, m int) (*whitened, error) {
	n, t := u.Dims()
	if n == 0 || t < 2 {
		return nil, fmt.Errorf("baselines: U of shape (%d, %d): need mixtures and at least 2 samples", n, t)
	}
	if err := checkFinite("U", u); err != nil {
		return nil, err
	}
	if m < 0 || m > n {
		return nil, fmt.Errorf("baselines: %d components asked of %d mixtures", m, n)
	}
	xc := mat.DenseCopyOf(u)
	for i := 0; i < n; i++ {
		row := xc.RawRowView(i)
		mu := 0.0
		for _, v := range row {
			mu += v
		}
		mu /= float64(t)
		for j := range row {
			row[j] -= mu
		}
	}
	var cov mat.SymDense
	cov.SymOuterK(1/float64(t), xc) // (n, n)
	var eig mat.EigenSym
	if !eig.Factorize(&cov, true) {
		return nil, fmt.Errorf("baselines: eigendecomposition of the %dx%d covariance failed", n, n)
	}
	vals := eig.Values(nil) // ascending
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	top := vals[n-1]
	if !(top > 0) {
		return nil, fmt.Errorf("baselines: U has no variance")
	}
	avail := 0
	for _, v := range vals {
		if v > eigenRelTol*top {
			avail++
		}
	}
	if m == 0 {
		m = avail
	}
	if m > avail {
		return nil, fmt.Errorf("baselines: %d components asked, U has only %d above round-off", m, avail)
	}
	w := mat.NewDense(m, n, nil)
	for i := 0; i < m; i++ {
		k := n - 1 - i // i-th largest
		s := 1 / math.Sqrt(vals[k])
		for j := 0; j < n; j++ {
			w.Set(i, j, s*vecs.At(j, k))
		}
	}
	z := mat.NewDense(m, t, nil)
	z.Mul(w, xc)
	return &whitened{z: z, w: w}, nil
}

// finish turns a map r (p, m) of whitened data (a rotation, or rows of one) into a Separation of u.
func finish(u *mat.Dense, wh *whitened, r mat.Matrix, iters int, converged bool) Separation {
	p, _ := r.Dims()
	n, _ := u.Dims()
	unmix := mat.NewDense(p, n, nil)
	unmix.Mul(r, wh.w)
	var src mat.Dense
	src.Mul(unmix, u)
	return Separation{Sources: &src, Unmixing: unmix, Iterations: iters, Converged: converged}
}
