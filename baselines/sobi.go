package baselines

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// SOBIOptions configures second-order joint diagonalisation.
type SOBIOptions struct {
	// Components is the number of sources to extract (0: as many as U has independent rows).
	Components int
	// Lags are the sample lags of the covariances to diagonalise (nil: 1..10).
	Lags []int
	// MaxSweeps bounds the Jacobi sweeps (0: 100).
	MaxSweeps int
}

// SOBI separates u (n mixtures, T samples) by joint diagonalisation of the symmetrised lagged
// covariances E[z_t z_{t+tau}^T] of the whitened data (Belouchrani et al. 1997), reusing JADE's
// Jacobi machinery. Along the columns of U (the feature index of a hidden state) "lag" means
// neighbouring features; it separates sources whose lagged autocorrelations differ, Gaussian or not.
func SOBI(ctx context.Context, u *mat.Dense, opts SOBIOptions) (Separation, error) {
	if opts.Lags == nil {
		for l := 1; l <= 10; l++ {
			opts.Lags = append(opts.Lags, l)
		}
	}
	if opts.MaxSweeps == 0 {
		opts.MaxSweeps = 100
	}
	wh, err := whiten(u, opts.Components)
	if err != nil {
		return Separation{}, err
	}
	m, t := wh.z.Dims()
	if len(opts.Lags) == 0 {
		return Separation{}, fmt.Errorf("baselines: SOBI needs at least one lag")
	}
	set := newSymSet(m, len(opts.Lags))
	for k, lag := range opts.Lags {
		if lag < 1 || lag >= t {
			return Separation{}, fmt.Errorf("baselines: SOBI lag %d outside [1, %d)", lag, t)
		}
		a := wh.z.Slice(0, m, 0, t-lag)
		b := wh.z.Slice(0, m, lag, t)
		var r mat.Dense
		r.Mul(a, b.T()) // (m, m)
		sym := mat.NewDense(m, m, nil)
		for i := 0; i < m; i++ {
			for j := 0; j < m; j++ {
				sym.Set(i, j, 0.5*(r.At(i, j)+r.At(j, i))/float64(t-lag))
			}
		}
		set.setMatrix(k, sym)
	}
	thresh := 1 / (100 * math.Sqrt(float64(t)))
	jd, err := jointDiagonalize(ctx, set, thresh, opts.MaxSweeps)
	if err != nil {
		return Separation{}, err
	}
	return finish(u, wh, jd.v.T(), jd.sweeps, jd.converged), nil
}
