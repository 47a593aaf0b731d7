package assess

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// absence proves texts absent from one block's U: a text none of whose rows can be a row of X is
// not in the batch. It wraps membership's space with a bound, derived here in the worst case, on
// how far the observed U_obs lies from A X, so that every row of X provably meets the bound a row
// is held to, whatever the shields, cond(A) and the observed dtype:
//
//	U_obs = A X + E,  ||E||_F <= errNorm
//
// E gathers A's rounding to float32 (|dA| <= u32 |A|), the float32 product A X (any summation
// order: |fl(A X) - A X| <= gamma_m(u32) |A| |X|, Higham's bound, and || |A| |X| ||_F <=
// ||A||_F ||X||_F), and the rounding to the observed dtype (|e| <= u |U|; fp16's subnormals add
// at most 2^-25 per entry). ||X||_F <= ||A X||_F / sigma_min(A), and GELO's A has singular values
// in [1, kappa] (data/gelo/mixing), so sigma_min(A) = 1 and ||A||_F <= sqrt(m) kappa.
//
// A row x_dep of X is w^T A X with w = A^-T e_i, ||w|| <= 1/sigma_min(A) = 1, so x_dep =
// w^T U_obs - w^T E. The attacker scores its recomputation x_att, ||x_att - x_dep|| <= rho
// ||x_dep|| (fptol.Recompute for the deployer's precision and the block's depth). Then:
//
//   - below full rank (the numerical rank r < d), the part of x_dep outside the retained row space
//     is at most sigma_{r+1}(U_obs) + ||E||, so a row of X has a residual fraction at most
//     ((sigma_{r+1} + errNorm) / ||x_att|| + rho / (1 - rho))^2;
//   - at full rank, l(x) = ||G^-1/2 x||^2 with G = U_obs^T U_obs, and ||U_obs G^-1/2|| = 1, so
//     sqrt(l(x_dep)) <= 1 + errNorm / sigma_min(U_obs), and a row of X has a leverage at most
//     (1 + errNorm / sigma_min(U_obs) + rho ||x_att|| / ((1 - rho) sigma_min(U_obs)))^2.
//
// Each row is held to the larger of this bound and membership's own (RowResidualBound,
// RowLeverageBound), so nothing here is narrower than what membership states. A row above it is
// not a row of X: one such row proves the text absent. Passing proves nothing (a text absent from
// the batch passes too past full rank with strong shields), so presence is never claimed. The
// premise left is rho: the deployer's rows are within fptol.Recompute of the attacker's (the
// measured and derived bound internal/fptol documents). The float64 arithmetic of the scores
// themselves errs by some 2^-53 cond(U)^2, decades below every term above.
type absence struct {
	sp *membership.Space
	// errNorm bounds ||U_obs - A X||_F; +Inf where the rounding bound is void (nothing excluded).
	errNorm float64
	rho     float64
}

// newAbsence prepares one block: uObs (nObs, d) every row of U observed in dtype, m = n + shields
// rows of X, cond(A) kappa (1: orthogonal), rho the recomputation error.
func newAbsence(uObs *mat.Dense, dtype string, m int, kappa, rho float64) (*absence, error) {
	u0, err := membership.UnitRoundoff(dtype)
	if err != nil {
		return nil, err
	}
	sp, err := membership.New(uObs, membership.Options{UnitRoundoff: u0, AllObserved: true,
		RankTol: membership.RankTol(uObs, u0), Recompute: rho})
	if err != nil {
		return nil, err
	}
	return &absence{sp: sp, errNorm: mixErrorBound(uObs, dtype, m, kappa), rho: rho}, nil
}

// mixErrorBound bounds ||U_obs - A X||_F from U_obs alone (absence's derivation): with c the
// relative error of A's rounding and the product against ||A X||_F, and u the observed dtype's unit
// round-off (0 for float32, whose rounding is the product's),
//
//	||A X||_F <= ||U_obs||_F / ((1 - u) (1 - c)) =: F,   ||E||_F <= (c + u) F (+ fp16's subnormals).
func mixErrorBound(uObs *mat.Dense, dtype string, m int, kappa float64) float64 {
	nObs, d := uObs.Dims()
	normA := math.Sqrt(float64(m)) * max(1, kappa) // ||A||_F, singular values in [1, kappa]
	c := (fptol.Gamma(m, fptol.Float32)*(1+fptol.Float32) + fptol.Float32) * normA
	u, tiny := 0.0, 0.0
	switch dtype {
	case DTypeBF16:
		u = fptol.BFloat16
	case DTypeFP16:
		u, tiny = fptol.Float16, 0x1p-25*math.Sqrt(float64(nObs*d))
	}
	if !(c < 1) || !(u < 1) {
		return math.Inf(1)
	}
	f := mat.Norm(uObs, 2) / ((1 - u) * (1 - c))
	return (c+u)*f + tiny
}

// rank is the block's numerical rank.
func (a *absence) rank() int { return a.sp.Rank() }

// excess scores a text's rows (len/d rows of width d) and returns the largest ratio of a row's
// statistic to the bound every row of X meets: above 1, that row is not a row of X and the text
// is proven absent. 0 where no row can be held to a bound.
func (a *absence) excess(rows []float32, d int) (float64, error) {
	sc, err := a.sp.Score(dense(rows, len(rows)/d, d))
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for i, e := range sc.Energy {
		var stat, bound float64
		if a.sp.FullRank() {
			stat, bound = sc.Leverage[i], a.leverageBound(e)
			if sc.LeverageBound != nil {
				bound = max(bound, sc.LeverageBound[i])
			}
		} else {
			stat, bound = sc.Residual[i], max(a.residualBound(e), a.sp.RowResidualBound(e))
			if bound >= 1 {
				continue // a fraction never exceeds 1: no proof from this row
			}
		}
		if math.IsInf(bound, 1) || math.IsNaN(bound) {
			continue
		}
		worst = max(worst, stat/bound)
	}
	return worst, nil
}

// residualBound is the largest residual fraction of a row of X whose recomputation has squared
// norm energy, below full rank (absence's derivation).
func (a *absence) residualBound(energy float64) float64 {
	if !(energy > 0) {
		return 1
	}
	r := (a.sp.SigmaDropped()+a.errNorm)/math.Sqrt(energy) + a.rho/(1-a.rho)
	return min(1, r*r)
}

// leverageBound is the largest leverage of a row of X whose recomputation has squared norm energy,
// at full rank (absence's derivation); +Inf where U_obs's smallest singular value is 0.
func (a *absence) leverageBound(energy float64) float64 {
	s := a.sp.SigmaMin()
	if !(s > 0) {
		return math.Inf(1)
	}
	r := 1 + a.errNorm/s + a.rho*math.Sqrt(energy)/((1-a.rho)*s)
	return r * r
}
