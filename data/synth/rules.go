package synth

import "github.com/gelo-research/geloattack/config/field"

// Rules is every numeric field of Config with its bounds and what 0 means, checked by Validate
// (after defaults) and by a run config (before them, so that a 0 the file sets is refused where it
// would silently become the default). The store synth and store info flags take their ranges from
// here. The maxima are far above any real corpus; they keep a value from reaching an allocation
// that panics, a float32 that overflows, or math/rand's Zipf sampler, which loops forever on an
// infinite exponent.
var Rules = field.Table[Config]{
	{Key: "texts", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 22}, Get: func(c Config) float64 { return float64(c.Texts) }},
	{Key: "min_tokens", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.MinTokens) }},
	{Key: "max_tokens", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.MaxTokens) }},
	{Key: "d", Bounds: field.Bounds{Int: true, Min: 2, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.D) }},
	{Key: "e", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.E) }},
	{Key: "norm_mean", Bounds: field.Bounds{Min: minNormMean, Max: maxNormMean}, Get: func(c Config) float64 { return c.NormMean }},
	{Key: "norm_cv", Bounds: field.Bounds{Min: 1e-6, Max: 0.3, Zero: "the default 0.04"}, Get: func(c Config) float64 { return c.NormCV }},
	{Key: "pr", Bounds: field.Bounds{Min: 1, Max: 1 << 16, Zero: "120*sqrt(d/4096)"}, Get: func(c Config) float64 { return c.PR }},
	{Key: "outliers", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "d/1024 clamped to [2, 8]"}, Get: func(c Config) float64 { return float64(c.Outliers) }},
	{Key: "vocab", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 24}, Get: func(c Config) float64 { return float64(c.Vocab) }},
	{Key: "zipf_s", Bounds: field.Bounds{Min: 1, Max: maxZipfS, MinOpen: true}, Get: func(c Config) float64 { return c.ZipfS }},
	{Key: "zipf_v", Bounds: field.Bounds{Min: 1, Max: maxZipfV}, Get: func(c Config) float64 { return c.ZipfV }},
	{Key: "frozen_mass", Bounds: field.Bounds{Min: 1e-6, Max: 1, MaxOpen: true, Zero: "the default 0.05"}, Get: func(c Config) float64 { return c.FrozenMass }},
	{Key: "weights.mean", Bounds: field.Bounds{Min: 0, Max: maxWeight}, Get: func(c Config) float64 { return c.Weights.Mean }},
	{Key: "weights.outlier", Bounds: field.Bounds{Min: 0, Max: maxWeight}, Get: func(c Config) float64 { return c.Weights.Outlier }},
	{Key: "weights.text", Bounds: field.Bounds{Min: 0, Max: maxWeight}, Get: func(c Config) float64 { return c.Weights.Text }},
	{Key: "weights.token", Bounds: field.Bounds{Min: 0, Max: maxWeight}, Get: func(c Config) float64 { return c.Weights.Token }},
	{Key: "weights.noise", Bounds: field.Bounds{Min: 0, Max: maxWeight}, Get: func(c Config) float64 { return c.Weights.Noise }},
}
