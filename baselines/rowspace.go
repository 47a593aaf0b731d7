package baselines

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/engine/blas"
)

// DefaultRankTol is the default relative singular-value cut-off of NewRowSpace: far below the
// smallest singular value of a float32 U with cond(A) up to 1e4, so the full row space is kept.
const DefaultRankTol = 1e-7

// RowSpace is an orthonormal basis of the row space of an observed U. Since U = A [H; S] with A
// invertible, rowspace(U) = rowspace([H; S]) whatever A is: every clean row lies in it.
type RowSpace struct {
	basis   *mat.Dense // (d, r), orthonormal columns spanning rowspace(U_obs)
	basis32 dense32    // the same in float32, for the coarse pass of Residuals
}

// NewRowSpace computes an orthonormal basis of the row space of uObs (n_obs, d), dropping
// directions whose singular value is below relTol times the largest (relTol 0 means
// DefaultRankTol).
//
// The basis comes from the small Gram matrix rather than an SVD of U (7x faster at n = 282,
// d = 4096): with U U^T = E diag(s^2) E^T, the columns of V1 = U^T E diag(1/s) are combinations of
// U's rows, so they span exactly its row space whatever the eigensolver's accuracy; a second pass
// on V1^T V1 ≈ I then restores orthonormality to round-off (as in CholeskyQR2).
func NewRowSpace(uObs *mat.Dense, relTol float64) (*RowSpace, error) {
	if relTol == 0 {
		relTol = DefaultRankTol
	}
	if relTol < 0 || relTol >= 1 || math.IsNaN(relTol) {
		return nil, fmt.Errorf("baselines: rank tolerance %v outside [0, 1)", relTol)
	}
	n, d := uObs.Dims()
	if n == 0 || d == 0 {
		return nil, fmt.Errorf("baselines: empty U (%d x %d)", n, d)
	}
	if err := checkFinite("U", uObs); err != nil {
		return nil, err
	}
	ur := uObs.RawMatrix()
	g := make([]float64, n*n) // (n, n) = U U^T
	blas.Gram(false, n, d, ur.Data, ur.Stride, g, n)
	v1, err := scaledEigenBasis(g, n, uObs, true, relTol*relTol)
	if err != nil {
		return nil, fmt.Errorf("baselines: row space of U (%d x %d): %w", n, d, err)
	}
	_, r := v1.Dims()
	vr := v1.RawMatrix()
	g2 := make([]float64, r*r) // (r, r) = V1^T V1 ≈ I
	blas.Gram(true, r, d, vr.Data, vr.Stride, g2, r)
	basis, err := scaledEigenBasis(g2, r, v1, false, 0)
	if err != nil {
		return nil, fmt.Errorf("baselines: re-orthonormalising the row space of U (%d x %d): %w", n, d, err)
	}
	return fromBasis(basis), nil
}

// fromBasis wraps an orthonormal basis (d, r).
func fromBasis(basis *mat.Dense) *RowSpace {
	return &RowSpace{basis: basis, basis32: toDense32(basis)}
}

// scaledEigenBasis returns Y E_k diag(lambda_k^-1/2) for the eigenpairs of the Gram matrix g of
// Y's columns (g = Y^T Y: (m, m), overwritten) whose eigenvalue exceeds relEig times the largest:
// orthonormal columns spanning the part of Y's column space those eigenpairs describe.
// Y: (d, m) is y, or y^T when transY (y: (m, d)). The Gram products, the eigendecomposition and
// this product run on engine/blas (OpenBLAS and LAPACK when loaded): gonum's took minutes at
// n, d = 4096.
func scaledEigenBasis(g []float64, m int, y *mat.Dense, transY bool, relEig float64) (*mat.Dense, error) {
	vals := make([]float64, m)
	if err := blas.EigSym(m, g, m, vals); err != nil { // ascending, vectors in g's columns
		return nil, fmt.Errorf("eigendecomposition of the %dx%d Gram matrix: %w", m, m, err)
	}
	if !(vals[m-1] > 0) {
		return nil, fmt.Errorf("the matrix is zero")
	}
	first := 0
	for first < m && !(vals[first] > relEig*vals[m-1]) {
		first++
	}
	k := m - first
	scaled := make([]float64, m*k) // (m, k)
	for j := first; j < m; j++ {
		s := 1 / math.Sqrt(vals[j])
		for i := 0; i < m; i++ {
			scaled[i*k+j-first] = g[i*m+j] * s
		}
	}
	yr := y.RawMatrix()
	d := yr.Rows
	if transY {
		d = yr.Cols
	}
	out := mat.NewDense(d, k, nil)
	or := out.RawMatrix()
	blas.Dgemm(transY, false, d, k, m, 1, yr.Data, yr.Stride, scaled, k, 0, or.Data, or.Stride)
	return out, nil
}

// Rank is the dimension of the row space.
func (s *RowSpace) Rank() int {
	_, r := s.basis.Dims()
	return r
}

// Dim is the width d of the rows it contains.
func (s *RowSpace) Dim() int {
	d, _ := s.basis.Dims()
	return d
}

// refineBelow is the coarse residual fraction below which Residuals recomputes a row exactly.
const refineBelow = 1e-3

// Residuals returns, for every row r of rows (t, d), the fraction of its energy outside the row
// space, ||r - Q Q^T r||^2 / ||r||^2, and its energy ||r||^2. A zero row gets residual fraction
// 1: it holds nothing that could be contained.
//
// A coarse pass takes 1 - ||Q^T r||^2 / ||r||^2 with Q^T r from a float32 GEMM (one product, ~10x
// faster than two in float64; absolute error ~1e-6). Rows it finds nearly contained (below 1e-3),
// the ones that decide retrieval, are recomputed with the residual vector formed explicitly in
// float64, which resolves fractions down to ~1e-30 instead of cancelling to zero near 1e-16.
func (s *RowSpace) Residuals(rows *mat.Dense) (frac, energy []float64, err error) {
	if _, d := rows.Dims(); d != s.Dim() {
		return nil, nil, fmt.Errorf("baselines: rows of width %d against a row space of width %d", d, s.Dim())
	}
	p, err := PrepareRows(rows)
	if err != nil {
		return nil, nil, err
	}
	return s.ResidualsPrepared(p)
}

// Aggregate says how the per-row residuals of a candidate text become one score.
type Aggregate int

const (
	// Energy scores a candidate by the fraction of its rows' total energy inside the row space
	// (SPEC §7). A source text whose rows entered the example only through a window scores the
	// window's share of its energy.
	Energy Aggregate = iota
	// BestRow scores a candidate by its best-contained row, which ignores how many of its rows
	// were sampled: one exactly contained row is proof of membership. Rows that are bit-identical
	// across texts (BOS and other frozen tokens) defeat it: at full observation every candidate
	// sharing such a row with the example scores as exactly contained (on the synthetic d = 4096
	// corpus its top-1 falls to chance while Energy's is 1).
	BestRow
)

// String names the aggregate as configs spell it.
func (a Aggregate) String() string {
	switch a {
	case Energy:
		return "energy"
	case BestRow:
		return "best_row"
	}
	return fmt.Sprintf("aggregate(%d)", int(a))
}

// ParseAggregate parses "energy" or "best_row".
func ParseAggregate(s string) (Aggregate, error) {
	switch s {
	case "energy":
		return Energy, nil
	case "best_row":
		return BestRow, nil
	}
	return 0, fmt.Errorf("baselines: aggregate %q: want energy or best_row", s)
}

// minResidual floors residual fractions so that logits of exactly contained rows stay finite.
const minResidual = 1e-30

// Containment is a candidate's row-space score.
type Containment struct {
	// Inside is the contained fraction in [0, 1]: of the total energy (Energy) or of the best row
	// (BestRow).
	Inside float64 `json:"inside"`
	// Logit is log(Inside / (1 - Inside)), the log-odds of containment, with the outside fraction
	// floored at 1e-30. It is the score the retrieval metrics take: exact containment (outside
	// ~1e-12 in float32) gives ~+28, a row at random ~log(r/(d-r)).
	Logit float64 `json:"logit"`
}

// Score aggregates the residuals of one candidate's rows (t, d).
func (s *RowSpace) Score(rows *mat.Dense, agg Aggregate) (Containment, error) {
	frac, energy, err := s.Residuals(rows)
	if err != nil {
		return Containment{}, err
	}
	return aggregate(frac, energy, agg)
}

// aggregate turns per-row residual fractions and energies into one Containment.
func aggregate(frac, energy []float64, agg Aggregate) (Containment, error) {
	if len(frac) == 0 {
		return Containment{}, fmt.Errorf("baselines: candidate with no rows")
	}
	var outside float64
	switch agg {
	case Energy:
		total, res := 0.0, 0.0
		for i, f := range frac {
			total += energy[i]
			res += f * energy[i]
		}
		outside = 1
		if total > 0 {
			outside = res / total
		}
	case BestRow:
		outside = 1
		for _, f := range frac {
			outside = min(outside, f)
		}
	default:
		return Containment{}, fmt.Errorf("baselines: unknown aggregate %d", int(agg))
	}
	outside = max(outside, minResidual)
	inside := 1 - outside
	return Containment{Inside: inside, Logit: math.Log(max(inside, minResidual)) - math.Log(outside)}, nil
}

// ScoreCandidates scores every candidate text (each its token rows, (t_c, d)) against the row
// space of uObs (n_obs, d). Logits of the result are the retrieval scores of the example.
func ScoreCandidates(uObs *mat.Dense, candidates []*mat.Dense, agg Aggregate, relTol float64) ([]Containment, error) {
	rs, err := NewRowSpace(uObs, relTol)
	if err != nil {
		return nil, err
	}
	out := make([]Containment, len(candidates))
	for c, rows := range candidates {
		if out[c], err = rs.Score(rows, agg); err != nil {
			return nil, fmt.Errorf("candidate %d: %w", c, err)
		}
	}
	return out, nil
}

// Logits extracts the logits of scores, in order.
func Logits(scores []Containment) []float64 {
	out := make([]float64, len(scores))
	for i, s := range scores {
		out[i] = s.Logit
	}
	return out
}

// checkFinite reports the first NaN or infinite entry of x.
func checkFinite(what string, x *mat.Dense) error {
	r, _ := x.Dims()
	for i := 0; i < r; i++ {
		for j, v := range x.RawRowView(i) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("baselines: %s[%d][%d] = %v is not finite", what, i, j, v)
			}
		}
	}
	return nil
}
