// Package presence is the absolute row test behind the claims of the training-free presence
// attack (`geloattack baseline -attack rowspace`): which rows of a candidate text can be rows of
// an example's X, given what the observer sees (U_obs, its dtype, whether every row reached it)
// and the recomputation error rho between the attacker's rows and the rows the deployer mixed.
// baselines.ProvenAbsent turns the rows' answers into a claim: a text none of whose possible
// samples passes is proven absent. Presence is never claimed: past full rank and with strong
// shields an absent text passes too.
//
// The test is baselines/membership's, the one content recovery's "not among the candidates" rests
// on: below full rank a row of X has a residual fraction at most Space.RowResidualBound (the
// rounding premise ResidualSafety u_eff, rho, and what the numerical rank cut dropped); at full
// rank a leverage at most its own Space.RowLeverageBound. With rows dropped neither holds, and
// every row passes (no proof).
package presence

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/gelo"
)

// Test returns the absence test of examples observed in dtype (the sampler's observe_dtype)
// whose candidate rows lie within rho of the mixed ones (||x_att - x_dep|| <= rho ||x_dep||; 0
// when the attacker's rows are the very rows mixed).
func Test(dtype gelo.ObserveDtype, rho float64) (baselines.AbsenceTest, error) {
	u0, err := membership.UnitRoundoff(string(dtype))
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	if !(rho >= 0 && rho < 1) {
		return nil, fmt.Errorf("presence: recomputation error %v: want 0 <= rho < 1", rho)
	}
	return func(ex *gelo.Example, uObs *mat.Dense) (baselines.RowTest, error) {
		sp, err := membership.New(uObs, membership.Options{UnitRoundoff: u0, AllObserved: ex.NObs == ex.N,
			RankTol: membership.RankTol(uObs, u0), Recompute: rho})
		if err != nil {
			return nil, fmt.Errorf("presence: %w", err)
		}
		return func(rows *mat.Dense) ([]bool, error) { return pass(sp, rows) }, nil
	}, nil
}

// pass tests rows (t, d) against sp: true where the row may be a row of X.
func pass(sp *membership.Space, rows *mat.Dense) ([]bool, error) {
	t, _ := rows.Dims()
	out := make([]bool, t)
	if !sp.AllObserved() {
		for i := range out {
			out[i] = true // rows dropped: a row of X need not lie in what was observed
		}
		return out, nil
	}
	sc, err := sp.Score(rows)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	for i := range out {
		if sp.FullRank() {
			out[i] = sc.Leverage[i] <= sc.LeverageBound[i]
		} else {
			out[i] = sc.Residual[i] <= sp.RowResidualBound(sc.Energy[i])
		}
	}
	return out, nil
}
