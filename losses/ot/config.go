package ot

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses/ot/otcfg"
)

// Variant selects how Sinkhorn treats the marginals (SPEC §5; otcfg.Variant).
type Variant = otcfg.Variant

// The OT variants of SPEC §5 (see otcfg).
const (
	// Balanced uses uniform marginals on both sides.
	Balanced = otcfg.Balanced
	// Dustbin adds one row and one column with a learned cost that absorb unmatched rows.
	Dustbin = otcfg.Dustbin
	// Unbalanced relaxes both marginals by a KL penalty of weight rho.
	Unbalanced = otcfg.Unbalanced
)

// MaxIters bounds Config.Iters (otcfg.MaxIters).
const MaxIters = otcfg.MaxIters

// DustbinParamName is the parameter name AddDustbinParam registers.
const DustbinParamName = "ot.dustbin_score"

// Config holds the unmixing-loss settings of SPEC §5 (otcfg.Config).
type Config = otcfg.Config

// DefaultConfig returns the documented defaults (otcfg.DefaultConfig).
func DefaultConfig() Config { return otcfg.DefaultConfig() }

// validateSinkhorn checks only the fields the OT loss reads, so OT can run under a config
// whose loss weights are all 0.
func validateSinkhorn(c Config) error {
	c.WOT = 1
	return c.Validate()
}

// tau is the factor rho/(rho+eps) of the unbalanced potential updates; 1 is balanced.
func tau(c Config) float32 {
	if c.Variant != Unbalanced {
		return 1
	}
	return float32(c.Rho / (c.Rho + c.Eps))
}

// AddDustbinParam registers the learned dustbin score, shape (1), without weight decay (a
// decayed score would be pulled towards a zero cost, that is towards leaving rows unmatched).
// Initialise it with InitDustbinParam after ps.Alloc.
func AddDustbinParam(ps *engine.Params) *engine.Tensor {
	return ps.Add(DustbinParamName, []int{1}, false)
}

// InitDustbinParam sets the dustbin score to cfg.DustbinInit.
func InitDustbinParam(score *engine.Tensor, cfg Config) error {
	if score == nil || score.Size() != 1 {
		return fmt.Errorf("ot: dustbin score %v: want one element", score)
	}
	if !finite(cfg.DustbinInit) {
		return fmt.Errorf("ot: dustbin_init: %v, want a finite value", cfg.DustbinInit)
	}
	if err := score.CopyFrom([]float32{float32(cfg.DustbinInit)}); err != nil {
		return fmt.Errorf("ot: initialising the dustbin score: %w", err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
