package membership

import "math"

// RowResidualBound is the largest residual fraction a recomputed row of X of squared norm energy
// can have below full rank, counting what the rank cut dropped:
//
//	(ResidualSafety u_eff + rho) / (1 - rho) + sigma_{r+1}(U_obs) / (sigma_min(A) ||x||), squared
//
// A row x of X is e_i^T A^-1 U exactly (every row observed), so its component along the
// directions of U below the numerical rank r is at most ||A^-T e_i|| sigma_{r+1} <=
// sigma_{r+1} / sigma_min(A); over ||x_att|| >= (1 - rho) ||x_dep|| this adds the second term to
// ResidualBound's (the rounding premise and the recomputation error). Where nothing was dropped
// (sigma_{r+1} = 0: rank = rows of U_obs) it is ResidualBound; where directions sank under the
// rounding floor (Deficient) it stays a bound, instead of a premise that no longer holds, and
// grows for short rows. With rows dropped a row of X need not lie in rowspace(U_obs) at all:
// callers do not read a failed test as absence then (AllObserved).
func (s *Space) RowResidualBound(energy float64) float64 {
	r := math.Sqrt(s.ResidualBound())
	if s.sigDrop > 0 {
		if !(energy > 0) {
			return 1 // a zero row: nothing to bound its fraction by
		}
		r += s.sigDrop / (s.opt.SigmaMinA * math.Sqrt(energy))
	}
	return min(1, r*r)
}

// SigmaDropped is the largest singular value of U_obs below the numerical rank (0 when the rank
// is the number of rows or d): what RowResidualBound allows a row of X to have lost.
func (s *Space) SigmaDropped() float64 { return s.sigDrop }
