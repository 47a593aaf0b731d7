package baselines

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/mat"
)

// FastICAOptions configures FastICA.
type FastICAOptions struct {
	// Components is the number of sources to extract (0: as many as U has independent rows).
	Components int
	// MaxIter bounds the fixed-point iterations (0: 200).
	MaxIter int
	// Tol stops the iteration when max_i |1 - |<w_i, w_i'>|| falls below it (0: 1e-4).
	Tol float64
	// Seed seeds the random initial unmixing matrix.
	Seed uint64
}

func (o *FastICAOptions) defaults() error {
	if o.MaxIter == 0 {
		o.MaxIter = 200
	}
	if o.Tol == 0 {
		o.Tol = 1e-4
	}
	if o.MaxIter < 0 || o.Tol < 0 || math.IsNaN(o.Tol) {
		return fmt.Errorf("baselines: FastICA MaxIter %d / Tol %v: want positive", o.MaxIter, o.Tol)
	}
	return nil
}

// FastICA separates u (n mixtures, T samples) with symmetric FastICA (Hyvärinen 1999): PCA
// whitening, then the fixed-point update W <- E[g(WZ) Z^T] - diag(E[g'(WZ)]) W with the logcosh
// contrast g = tanh, followed by symmetric decorrelation W <- (W W^T)^{-1/2} W. Not converging
// within MaxIter is reported in the result, not as an error. It needs T large against n: on
// Laplace sources with T = 4096 it recovers n = 192 (mean |cos| 0.96, 235 iterations) but at
// n = 256 settles on a spurious fixed point (0.25 after 404 iterations) that T = 8192 avoids (0.98).
func FastICA(ctx context.Context, u *mat.Dense, opts FastICAOptions) (Separation, error) {
	if err := opts.defaults(); err != nil {
		return Separation{}, err
	}
	wh, err := whiten(u, opts.Components)
	if err != nil {
		return Separation{}, err
	}
	w, iters, conv, err := fastICAWhite(ctx, wh.z, opts)
	if err != nil {
		return Separation{}, err
	}
	return finish(u, wh, w, iters, conv), nil
}

// fastICAWhite runs symmetric FastICA on whitened data z (m, T) and returns the orthogonal
// unmixing matrix W (m, m) of z.
func fastICAWhite(ctx context.Context, z *mat.Dense, opts FastICAOptions) (*mat.Dense, int, bool, error) {
	m, t := z.Dims()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x66617374696361)) // "fastica"
	w := mat.NewDense(m, m, nil)
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			w.Set(i, j, rng.NormFloat64())
		}
	}
	if err := symDecorrelate(w); err != nil {
		return nil, 0, false, err
	}
	z32 := toDense32(z)
	w32 := newDense32(m, m)
	y32 := newDense32(m, t) // current source estimates, then g of them
	n32 := newDense32(m, m)
	gp := make([]float64, m)
	workers := 1
	if m*t >= parallelWork {
		workers = min(runtime.GOMAXPROCS(0), m)
	}
	for it := 1; it <= opts.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return nil, it, false, err
		}
		w32.set(w)
		mulNN(y32, w32, z32) // (m, T)
		parallelFor(workers, m, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				row := y32.data[i*t : (i+1)*t]
				s := 0.0
				for j, v := range row {
					g := math.Tanh(float64(v))
					row[j] = float32(g)
					s += 1 - g*g
				}
				gp[i] = s / float64(t)
			}
		})
		mulNT(n32, y32, z32) // (m, m): sum_t g(y_t) z_t^T
		next := n32.toDense64(1 / float64(t))
		for i := 0; i < m; i++ {
			row, wr := next.RawRowView(i), w.RawRowView(i)
			for j := range row {
				row[j] -= gp[i] * wr[j]
			}
		}
		if err := symDecorrelate(next); err != nil {
			return nil, it, false, err
		}
		// Converged when every new row is parallel (up to sign) to the old one.
		lim := 0.0
		for i := 0; i < m; i++ {
			lim = max(lim, math.Abs(1-math.Abs(dot(next.RawRowView(i), w.RawRowView(i)))))
		}
		w = next
		if lim < opts.Tol {
			return w, it, true, nil
		}
	}
	return w, opts.MaxIter, false, nil
}

// symDecorrelate replaces w (m, m) by (w w^T)^{-1/2} w, the orthogonal matrix nearest to it.
func symDecorrelate(w *mat.Dense) error {
	m, _ := w.Dims()
	var g mat.SymDense
	g.SymOuterK(1, w)
	var eig mat.EigenSym
	if !eig.Factorize(&g, true) {
		return fmt.Errorf("baselines: symmetric decorrelation: eigendecomposition failed")
	}
	vals := eig.Values(nil)
	var e mat.Dense
	eig.VectorsTo(&e)
	if !(vals[0] > 1e-300) {
		return fmt.Errorf("baselines: symmetric decorrelation of a singular matrix (smallest eigenvalue %v)", vals[0])
	}
	// e diag(vals^-1/2) e^T w
	scaled := mat.NewDense(m, m, nil)
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			scaled.Set(i, j, e.At(i, j)/math.Sqrt(vals[j]))
		}
	}
	var inv mat.Dense
	inv.Mul(scaled, e.T())
	var out mat.Dense
	out.Mul(&inv, w)
	w.Copy(&out)
	return nil
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, x := range a {
		s += x * b[i]
	}
	return s
}
