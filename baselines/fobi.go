package baselines

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// FOBIOptions configures FOBI.
type FOBIOptions struct {
	// Components is the number of sources to extract (0: as many as U has independent rows).
	Components int
}

// FOBI separates u (n mixtures, T samples) by fourth-order blind identification (Cardoso 1989):
// after PCA whitening, the eigenvectors of the weighted covariance E[||z||^2 z z^T] are the
// unmixing directions. Its eigenvalues are E[s_i^4] + m - 1, so sources must have pairwise
// distinct kurtoses; sources with equal kurtosis stay mixed among themselves.
func FOBI(ctx context.Context, u *mat.Dense, opts FOBIOptions) (Separation, error) {
	wh, err := whiten(u, opts.Components)
	if err != nil {
		return Separation{}, err
	}
	if err := ctx.Err(); err != nil {
		return Separation{}, err
	}
	m, t := wh.z.Dims()
	w := make([]float32, t)
	for i := 0; i < m; i++ {
		for j, v := range wh.z.RawRowView(i) {
			w[j] += float32(v * v)
		}
	}
	omega := newMomenter(toDense32(wh.z)).moment(w) // (m, m), symmetric
	sym := mat.NewSymDense(m, omega.RawMatrix().Data)
	var eig mat.EigenSym
	if !eig.Factorize(sym, true) {
		return Separation{}, fmt.Errorf("baselines: FOBI: eigendecomposition of the %dx%d weighted covariance failed", m, m)
	}
	var v mat.Dense
	eig.VectorsTo(&v)
	return finish(u, wh, v.T(), 0, true), nil
}
