package content

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/baselines/membership"
)

// Recompute is the recomputation error the attack allows for: how far its candidate rows may lie
// from the rows the deployer mixed although the text is the same (another BLAS kernel, another
// batch, another precision), and where the figure came from.
type Recompute struct {
	// Rho bounds ||x_att - x_dep|| / ||x_dep|| (membership.Options.Recompute).
	Rho float64 `json:"rho"`
	// Precision is the deployer's declared compute precision; empty when Rho was given.
	Precision string `json:"deployer_precision,omitempty"`
	// Compute is membership.RecomputeError's part for Blocks blocks of width Width; StoreRoundoff
	// the unit round-off of the store's rows, which both sides round to (0: float32 rows).
	Compute       float64 `json:"compute,omitempty"`
	StoreRoundoff float64 `json:"store_roundoff,omitempty"`
	Blocks        int     `json:"blocks,omitempty"`
	Width         int     `json:"width,omitempty"`
}

// DefaultRecompute is the recomputation error for a deployer computing in precision (fp32, bf16
// or fp16) the rows emb computes: membership.RecomputeError through emb's layer at its width,
// widened by membership.StoredRecompute where emb rounds rows to the store's float16, as the
// victim's rows were rounded (both sides round, so a last-bit difference can flip a float16
// rounding: up to 2^-10 relative whatever the precision).
func DefaultRecompute(emb *Embedder, precision string) (Recompute, error) {
	c, err := membership.RecomputeError(precision, emb.Layer(), emb.D())
	if err != nil {
		return Recompute{}, fmt.Errorf("content: %w", err)
	}
	u := emb.StoreRoundoff()
	return Recompute{Rho: membership.StoredRecompute(c, u), Precision: precision, Compute: c,
		StoreRoundoff: u, Blocks: emb.Layer(), Width: emb.D()}, nil
}

// ExplicitRecompute is a recomputation error given by the user, storage rounding included.
func ExplicitRecompute(rho float64) (Recompute, error) {
	if !(rho >= 0 && rho < 1) {
		return Recompute{}, fmt.Errorf("content: recomputation error %v: want 0 <= rho < 1", rho)
	}
	return Recompute{Rho: rho}, nil
}

// Source says where Rho came from: the user's figure, or the deployer precision, depth and width
// it was derived for (and the store's rounding).
func (r Recompute) Source() string {
	switch {
	case r.Precision == "":
		return "given with -recompute-error"
	case r.StoreRoundoff > 0:
		return fmt.Sprintf("deployer %s through %d blocks of width %d: %.2g, both rows rounded to the store's unit round-off 2^%d",
			r.Precision, r.Blocks, r.Width, r.Compute, int(math.Round(math.Log2(r.StoreRoundoff))))
	}
	return fmt.Sprintf("deployer %s through %d blocks of width %d", r.Precision, r.Blocks, r.Width)
}

// String says which bound is in force, for the run's header.
func (r Recompute) String() string {
	return fmt.Sprintf("recomputation error rho %.3g (%s); claims below full rank need the residual within ((10 u_eff + rho)/(1 - rho))^2, a lead, and every other candidate and every neighbour of the claim (one edit away) beyond it; past full rank nothing is claimed, and \"not among the candidates\" needs every candidate's leverage above its own bound (sqrt(1.25) + rho |x| / ((1 - rho) sigma_min(U)))^2",
		r.Rho, r.Source())
}
