package membership

import (
	"fmt"

	"github.com/gelo-research/geloattack/internal/fptol"
)

// Compute precisions a deployer can declare for its forward pass (RecomputeError).
const (
	PrecisionFP32 = fptol.PrecisionFP32
	PrecisionBF16 = fptol.PrecisionBF16
	PrecisionFP16 = fptol.PrecisionFP16
)

// ComputePrecisions lists the precisions RecomputeError accepts.
var ComputePrecisions = []string{PrecisionFP32, PrecisionBF16, PrecisionFP16}

// RecomputeError is a default for Options.Recompute: fptol.Recompute, the one bound on the
// relative 2-norm error between the row a deployer computed in precision (fp32, bf16 or fp16)
// and the attacker's fp32 recomputation of it, for rows that went through blocks transformer
// blocks of hidden size width (its comment gives the rounding model, the fit to a PyTorch
// deployer and the measurements behind both). Rows rounded to a storage format afterwards (a
// float16 store) need StoredRecompute on top.
func RecomputeError(precision string, blocks, width int) (float64, error) {
	rho, err := fptol.Recompute(precision, blocks, width)
	if err != nil {
		return 0, fmt.Errorf("membership: %w", err)
	}
	return rho, nil
}

// StoredRecompute widens a recomputation error rho for rows that both sides round to a storage
// format of unit round-off uStore after computing them (the attacker rounds its candidate rows
// as the store writer rounded the deployer's; 0: no rounding). Rounding to nearest turns a
// difference far below uStore into a flipped last bit, so the bound is additive, not relative:
// with rd(a) = a (1 + eps_a), |eps| <= uStore per element,
//
//	||rd(a) - rd(b)|| <= (1 + uStore) ||a - b|| + 2 uStore ||a||,  ||rd(a)|| >= (1 - uStore) ||a||,
//
// so the relative error of the rounded rows is at most ((1 + uStore) rho + 2 uStore) / (1 - uStore).
// Measured on the small MiniLM store (float16): 3.2e-4 at most where the fp32 rows differed by
// 1.3e-6; the bound is 9.8e-4.
func StoredRecompute(rho, uStore float64) float64 {
	if uStore == 0 {
		return rho
	}
	return ((1+uStore)*rho + 2*uStore) / (1 - uStore)
}
