package baselines

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// AnchorMethod says how known anchor rows are used to recover the other rows.
type AnchorMethod int

const (
	// Subtract removes the anchors' estimated contribution, U - Â_K X_K, leaving n mixtures of
	// the n - k other rows (rank n - k up to estimation error), and runs FastICA on their n - k
	// leading principal components.
	Subtract AnchorMethod = iota
	// Project projects the mixture space (the left side of U) onto the orthogonal complement of
	// the estimated anchor columns Â_K: with an orthonormal basis Q_c (n, n-k) of that complement,
	// Q_c^T U = Q_c^T A_R X_R has no anchor left and the other rows undistorted; FastICA runs on it.
	Project
	// Constrained whitens U, fixes the k directions of the whitened space that extract the
	// anchors (the cross-covariances of the whitened mixtures with the anchor rows), and runs
	// FastICA only over the orthogonal complement of those directions.
	Constrained
)

// String names the method as configs spell it.
func (m AnchorMethod) String() string {
	switch m {
	case Subtract:
		return "subtract"
	case Project:
		return "project"
	case Constrained:
		return "constrained"
	}
	return fmt.Sprintf("anchor_method(%d)", int(m))
}

// ParseAnchorMethod parses "subtract", "project" or "constrained".
func ParseAnchorMethod(s string) (AnchorMethod, error) {
	for _, m := range []AnchorMethod{Subtract, Project, Constrained} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("baselines: anchor method %q: want subtract, project or constrained", s)
}

// AnchorOptions configures anchor-based recovery.
type AnchorOptions struct {
	// Method selects how the anchors are removed.
	Method AnchorMethod
	// Ridge is the ridge penalty relative to the mean anchor energy: lambda = Ridge * tr(X_K X_K^T)/k
	// (0: 1e-6; negative: none).
	Ridge float64
	// ICA configures the FastICA run on the non-anchor part (Components is set by the method).
	ICA FastICAOptions
}

// AnchorResult is the outcome of anchor-based recovery.
type AnchorResult struct {
	// MixingK is the ridge estimate Â_K (n, k) of the columns of A that multiply the anchor rows.
	MixingK *mat.Dense
	// Anchored is Â_K X_K (n, T): the anchors' estimated share of U.
	Anchored *mat.Dense
	// Rest separates the other n - k rows: Rest.Sources is (n-k, T) and Rest.Unmixing (n-k, n)
	// acts on U (Project, Constrained) or on U - Anchored (Subtract, whose residual is not a
	// linear map of U alone).
	Rest Separation
}

// Anchors recovers U = A X (n, T) when the attacker knows k rows X_K (k, T) of X (for example
// hidden states of tokens it can predict). Reading of the paper, which names the steps only:
// the anchors' mixing columns are estimated by ridge regression of U on X_K,
// Â_K = U X_K^T (X_K X_K^T + lambda I)^{-1}, which is unbiased up to the correlation of the
// other rows with the anchors; the remaining n - k rows are then separated by FastICA after
// removing the anchors by one of the three AnchorMethods.
func Anchors(ctx context.Context, u, anchors *mat.Dense, opts AnchorOptions) (AnchorResult, error) {
	n, t := u.Dims()
	k, ta := anchors.Dims()
	if ta != t {
		return AnchorResult{}, fmt.Errorf("baselines: anchors have %d columns, U has %d", ta, t)
	}
	if k < 1 || k >= n {
		return AnchorResult{}, fmt.Errorf("baselines: %d anchors for %d mixtures: want 1 <= k < n", k, n)
	}
	if err := checkFinite("anchor", anchors); err != nil {
		return AnchorResult{}, err
	}
	if err := checkFinite("U", u); err != nil {
		return AnchorResult{}, err
	}
	ak, err := ridgeMixing(u, anchors, opts.Ridge)
	if err != nil {
		return AnchorResult{}, err
	}
	var anchored mat.Dense
	anchored.Mul(ak, anchors)
	res := AnchorResult{MixingK: ak, Anchored: &anchored}
	ica := opts.ICA
	ica.Components = n - k
	if err := ica.defaults(); err != nil {
		return AnchorResult{}, err
	}
	switch opts.Method {
	case Subtract:
		var rest mat.Dense
		rest.Sub(u, &anchored)
		sep, err := FastICA(ctx, &rest, ica)
		if err != nil {
			return AnchorResult{}, fmt.Errorf("baselines: FastICA after subtracting anchors: %w", err)
		}
		res.Rest = sep
	case Project:
		qc, err := complementBasis(ak) // (n, n-k)
		if err != nil {
			return AnchorResult{}, err
		}
		var proj mat.Dense
		proj.Mul(qc.T(), u) // (n-k, T)
		sep, err := FastICA(ctx, &proj, ica)
		if err != nil {
			return AnchorResult{}, fmt.Errorf("baselines: FastICA after projecting anchors out: %w", err)
		}
		var unmix mat.Dense
		unmix.Mul(sep.Unmixing, qc.T()) // (n-k, n)
		sep.Unmixing = &unmix
		res.Rest = sep
	case Constrained:
		sep, err := constrainedICA(ctx, u, anchors, ica)
		if err != nil {
			return AnchorResult{}, err
		}
		res.Rest = sep
	default:
		return AnchorResult{}, fmt.Errorf("baselines: unknown anchor method %d", int(opts.Method))
	}
	return res, nil
}

// ridgeMixing returns Â_K = U X_K^T (X_K X_K^T + lambda I)^{-1}, u: (n, T), xk: (k, T).
func ridgeMixing(u, xk *mat.Dense, ridge float64) (*mat.Dense, error) {
	k, _ := xk.Dims()
	if ridge == 0 {
		ridge = 1e-6
	}
	if math.IsNaN(ridge) || math.IsInf(ridge, 0) {
		return nil, fmt.Errorf("baselines: ridge %v", ridge)
	}
	var g mat.SymDense
	g.SymOuterK(1, xk) // (k, k)
	if ridge > 0 {
		lambda := ridge * g.Trace() / float64(k)
		for i := 0; i < k; i++ {
			g.SetSym(i, i, g.At(i, i)+lambda)
		}
	}
	var chol mat.Cholesky
	if !chol.Factorize(&g) {
		return nil, fmt.Errorf("baselines: anchor Gram matrix (%dx%d) is singular: anchors are linearly dependent", k, k)
	}
	var c mat.Dense
	c.Mul(u, xk.T()) // (n, k)
	// Â_K = c G^{-1}, i.e. G Â_K^T = c^T.
	var akT mat.Dense
	if err := chol.SolveTo(&akT, c.T()); err != nil {
		return nil, fmt.Errorf("baselines: solving for the anchor mixing columns: %w", err)
	}
	return mat.DenseCopyOf(akT.T()), nil
}

// complementBasis returns an orthonormal basis (n, n-k) of the orthogonal complement of the
// column space of a (n, k), from the full QR of a.
func complementBasis(a *mat.Dense) (*mat.Dense, error) {
	n, k := a.Dims()
	var qr mat.QR
	qr.Factorize(a)
	var q mat.Dense
	qr.QTo(&q) // (n, n)
	var r mat.Dense
	qr.RTo(&r)
	for i := 0; i < k; i++ {
		if math.Abs(r.At(i, i)) <= 1e-12*mat.Norm(a, 2) {
			return nil, fmt.Errorf("baselines: the %d anchor mixing columns are linearly dependent", k)
		}
	}
	return mat.DenseCopyOf(q.Slice(0, n, k, n)), nil
}

// constrainedICA whitens u fully, fixes the whitened-space directions that extract the anchors
// and runs FastICA on the orthogonal complement of those directions.
func constrainedICA(ctx context.Context, u, anchors *mat.Dense, ica FastICAOptions) (Separation, error) {
	n, t := u.Dims()
	k, _ := anchors.Dims()
	wh, err := whiten(u, n)
	if err != nil {
		return Separation{}, err
	}
	// b: (n, k), column a = E[z (x_a - mean)]: in whitened coordinates (identity covariance) the
	// least-squares direction that reproduces anchor a from z.
	b := mat.NewDense(n, k, nil)
	for a := 0; a < k; a++ {
		x := anchors.RawRowView(a)
		mu := 0.0
		for _, v := range x {
			mu += v
		}
		mu /= float64(t)
		for i := 0; i < n; i++ {
			s := 0.0
			for j, v := range wh.z.RawRowView(i) {
				s += v * (x[j] - mu)
			}
			b.Set(i, a, s/float64(t))
		}
	}
	qc, err := complementBasis(b) // (n, n-k)
	if err != nil {
		return Separation{}, err
	}
	var zc mat.Dense
	zc.Mul(qc.T(), wh.z) // (n-k, T), still white: qc has orthonormal columns
	w, iters, conv, err := fastICAWhite(ctx, &zc, ica)
	if err != nil {
		return Separation{}, fmt.Errorf("baselines: constrained FastICA: %w", err)
	}
	var rot mat.Dense
	rot.Mul(w, qc.T()) // (n-k, n) rotation of the whitened space
	return finish(u, wh, &rot, iters, conv), nil
}
