// Package otcfg is the schema of the unmixing loss (SPEC §5): the loss.unmix section of a run
// config, its defaults and its range checks, free of the engine so that reading a config links no
// device code. Package ot computes the loss and re-exports everything here.
package otcfg

import (
	"github.com/gelo-research/geloattack/internal/field"
)

// Variant selects how Sinkhorn treats the marginals (SPEC §5).
type Variant string

// The OT variants of SPEC §5.
const (
	// Balanced uses uniform marginals on both sides: every predicted row and every clean row
	// carries the same mass, all of it transported.
	Balanced Variant = "balanced"
	// Dustbin adds one row and one column with a learned cost (SuperGlue) that absorb
	// unmatched rows, so surplus predictions need not be averaged onto clean rows.
	Dustbin Variant = "dustbin"
	// Unbalanced relaxes both marginals by a KL penalty of weight rho (Chizat et al.).
	Unbalanced Variant = "unbalanced"
)

// MaxIters bounds Config.Iters: every iteration is recorded on the tape, so the activation
// memory grows linearly with it.
const MaxIters = 10000

// Config holds the unmixing-loss settings of SPEC §5.
type Config struct {
	// Variant is balanced, dustbin or unbalanced. Default balanced.
	Variant Variant `yaml:"variant" json:"variant"`
	// Eps is the entropic regularisation, in units of the normalised cost ||.||^2/m^2.
	// Default 0.05.
	Eps float64 `yaml:"eps" json:"eps"`
	// Iters is the number of unrolled Sinkhorn iterations (one f and one g update each).
	// Default 50.
	Iters int `yaml:"iters" json:"iters"`
	// Rho is the KL weight of the unbalanced variant, in cost units; larger is closer to
	// balanced. Unused by the other variants. Default 1.
	Rho float64 `yaml:"rho" json:"rho"`
	// DustbinInit is the initial dustbin cost (normalised cost units): a clean/predicted pair
	// whose cost exceeds it is cheaper left unmatched. Default 1 (about cos < 0.5 for rows of
	// norm m).
	DustbinInit float64 `yaml:"dustbin_init" json:"dustbin_init"`
	// WCyc weights the cycle loss L_cyc. Default 1.
	WCyc float64 `yaml:"w_cyc" json:"w_cyc"`
	// WOT weights L_OT. Default 1.
	WOT float64 `yaml:"w_ot" json:"w_ot"`
	// LambdaA weights ||A_hat||_F^2 / (n_obs S). Default 0.001.
	LambdaA float64 `yaml:"lambda_a" json:"lambda_a"`
	// WNorm weights the row-norm term (mean ||h_hat|| - mean ||h||)^2 / m^2. Default 0.1.
	WNorm float64 `yaml:"w_norm" json:"w_norm"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Variant:     Balanced,
		Eps:         0.05,
		Iters:       50,
		Rho:         1,
		DustbinInit: 1,
		WCyc:        1,
		WOT:         1,
		LambdaA:     1e-3,
		WNorm:       0.1,
	}
}

// Rules is every numeric field of Config with its bounds: Validate checks them. Every bound is
// finite: Sinkhorn divides costs by eps and exponentiates in float32, so an eps below 1e-4 or a
// weight of 1e300 fails at the first step rather than here.
var Rules = field.Table[Config]{
	{Key: "eps", Bounds: field.Bounds{Min: 1e-4, Max: 1e4}, Get: func(c Config) float64 { return c.Eps }},
	{Key: "iters", Bounds: field.Bounds{Int: true, Min: 1, Max: MaxIters}, Get: func(c Config) float64 { return float64(c.Iters) }},
	{Key: "rho", Bounds: field.Bounds{Min: 1e-4, Max: 1e6}, Get: func(c Config) float64 { return c.Rho }},
	{Key: "dustbin_init", Bounds: field.Bounds{Min: -1e6, Max: 1e6}, Get: func(c Config) float64 { return c.DustbinInit }},
	{Key: "w_cyc", Bounds: field.Bounds{Min: 0, Max: 1e6}, Get: func(c Config) float64 { return c.WCyc }},
	{Key: "w_ot", Bounds: field.Bounds{Min: 0, Max: 1e6}, Get: func(c Config) float64 { return c.WOT }},
	{Key: "lambda_a", Bounds: field.Bounds{Min: 0, Max: 1e6}, Get: func(c Config) float64 { return c.LambdaA }},
	{Key: "w_norm", Bounds: field.Bounds{Min: 0, Max: 1e6}, Get: func(c Config) float64 { return c.WNorm }},
}

// Validate reports the first field outside its allowed range, as a *field.Error naming the key
// and its value.
func (c Config) Validate() error {
	switch c.Variant {
	case Balanced, Dustbin, Unbalanced:
	default:
		return field.Errorf("variant", "%q, want balanced, dustbin or unbalanced", c.Variant)
	}
	if err := Rules.Check(c); err != nil {
		return err
	}
	if c.WCyc == 0 && c.WOT == 0 && c.LambdaA == 0 && c.WNorm == 0 {
		return field.Errorf("w_cyc", "w_cyc, w_ot, lambda_a, w_norm: all 0, want at least one > 0")
	}
	return nil
}
