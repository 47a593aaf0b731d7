// Package synthcfg is the synthetic store's configuration (the store.synth section of a run
// config): its fields, defaults, rules and checks, a schema leaf that links neither the
// generator nor the Arrow store, so reading a config does not. data/synth re-exports it.
package synthcfg

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/internal/field"
)

// Row dtypes of a synthetic store: the values of data/store's Float16 and Float32 (a test holds
// them equal), written out so that this leaf does not import the store.
const (
	Float16 = "float16"
	Float32 = "float32"
)

// Weights are the shares of a row's expected squared norm (before the norm is fixed to rho) taken
// by each component. Their sum is normalised to 1.
type Weights struct {
	Mean    float64 `yaml:"mean" json:"mean"`       // common mean direction
	Outlier float64 `yaml:"outlier" json:"outlier"` // the few outlier coordinates
	Text    float64 `yaml:"text" json:"text"`       // the text's latent direction
	Token   float64 `yaml:"token" json:"token"`     // the token's vocabulary vector
	Noise   float64 `yaml:"noise" json:"noise"`     // per-row noise
}

// Config describes a synthetic corpus. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Texts     int    `yaml:"texts" json:"texts"`           // number of texts
	MinTokens int    `yaml:"min_tokens" json:"min_tokens"` // shortest text, in rows
	MaxTokens int    `yaml:"max_tokens" json:"max_tokens"` // longest text, in rows
	D         int    `yaml:"d" json:"d"`                   // row width
	E         int    `yaml:"e" json:"e"`                   // text embedding width
	Seed      uint64 `yaml:"seed" json:"seed"`             // chooses the texts (0 is a valid seed)
	ModelSeed uint64 `yaml:"model_seed" json:"model_seed"` // chooses the fixed model: profile, mean, outliers, vocabulary, embedding map
	// DType is "float16" (default) or "float32": rows are rounded as a store of that dtype keeps
	// them, so Generate and a store written by WriteStore hold identical values.
	DType string `yaml:"dtype" json:"dtype"`
	// NormMean and NormCV set the row norm: mean and coefficient of variation.
	NormMean float64 `yaml:"norm_mean" json:"norm_mean"`
	NormCV   float64 `yaml:"norm_cv" json:"norm_cv"`
	// PR is the participation ratio of the variance profile. Default 120 sqrt(d/4096): 120 at
	// d = 4096 as measured on LLM hidden states, 30 at d = 256, so smaller widths stay anisotropic
	// without collapsing onto a handful of directions.
	PR float64 `yaml:"pr" json:"pr"`
	// Outliers is the number of high-magnitude coordinates; default d/1024 clamped to [2, 8].
	Outliers int `yaml:"outliers" json:"outliers"`
	// Vocab, ZipfS and ZipfV define the token distribution P(rank k) ∝ (ZipfV + k)^-ZipfS.
	Vocab int     `yaml:"vocab" json:"vocab"`
	ZipfS float64 `yaml:"zipf_s" json:"zipf_s"`
	ZipfV float64 `yaml:"zipf_v" json:"zipf_v"`
	// FrozenMass is the token mass of the most frequent vocabulary ids whose rows are frozen
	// (bit-identical everywhere). BOS at position 0 is always frozen.
	FrozenMass float64 `yaml:"frozen_mass" json:"frozen_mass"`
	// Weights split a row's energy; the zero value means DefaultConfig's.
	Weights Weights `yaml:"weights" json:"weights"`
}

// DefaultConfig is the embedded default corpus: 2000 texts of 32..96 rows at d = 256, e = 128.
func DefaultConfig() Config {
	return Config{
		Texts: 2000, MinTokens: 32, MaxTokens: 96, D: 256, E: 128, DType: Float16,
		NormMean: 24, NormCV: 0.04, Vocab: 2048, ZipfS: 1.1, ZipfV: 20, FrozenMass: 0.05,
		// 40% of a row's energy in the common mean and outliers, 30% in the text.
		Weights: Weights{Mean: 0.25, Outlier: 0.15, Text: 0.3, Token: 0.15, Noise: 0.15},
	}
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	def := DefaultConfig()
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&c.Texts, def.Texts)
	setInt(&c.MinTokens, def.MinTokens)
	setInt(&c.MaxTokens, max(def.MaxTokens, c.MinTokens))
	setInt(&c.D, def.D)
	setInt(&c.E, def.E)
	setInt(&c.Vocab, def.Vocab)
	setInt(&c.Outliers, min(max(c.D/1024, 2), 8, c.D/2))
	if c.DType == "" {
		c.DType = def.DType
	}
	setF(&c.NormMean, def.NormMean)
	setF(&c.NormCV, def.NormCV)
	setF(&c.ZipfS, def.ZipfS)
	setF(&c.ZipfV, def.ZipfV)
	setF(&c.FrozenMass, def.FrozenMass)
	setF(&c.PR, min(120*math.Sqrt(float64(c.D)/4096), float64(c.D)))
	if c.Weights == (Weights{}) {
		c.Weights = def.Weights
	}
	return c
}

// Bounds of the float fields beyond which generation would hang (math/rand's Zipf sampler loops
// forever for an infinite or huge exponent) or produce NaN rows (a norm or a weight share that
// underflows): Rules holds them, and Validate refuses values outside, naming the key.
const (
	// MinNormMean and MaxNormMean bound norm_mean.
	MinNormMean = 1e-2
	MaxNormMean = 1000
	// MaxZipfS and MaxZipfV bound zipf_s and zipf_v.
	MaxZipfS = 10
	MaxZipfV = 1e6
	// MaxWeight bounds each of weights.*.
	MaxWeight = 1e6
	// MinRandShare is the smallest (text+token+noise) / (sum of weights).
	MinRandShare = 1e-3
)

// Validate reports the first field out of range, after defaults. Messages start with the field's
// YAML key, so a config error names store.synth.<key>.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := Rules.Check(c); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	w := c.Weights
	var err error
	switch {
	case c.MaxTokens < c.MinTokens:
		err = field.Errorf("max_tokens", "%d, want at least min_tokens = %d", c.MaxTokens, c.MinTokens)
	case c.DType != Float16 && c.DType != Float32:
		err = field.Errorf("dtype", "%q, want %q or %q", c.DType, Float16, Float32)
	case c.PR > float64(c.D):
		err = field.Errorf("pr", "participation ratio %v, want at most d = %d", c.PR, c.D)
	case c.Outliers > c.D:
		err = field.Errorf("outliers", "%d, want at most d = %d", c.Outliers, c.D)
	case !(w.Text+w.Token+w.Noise > 0) || !(w.Text+w.Token+w.Noise >= MinRandShare*(w.Mean+w.Outlier+w.Text+w.Token+w.Noise)):
		err = field.Errorf("weights", "%+v, want text+token+noise > 0 and at least %g of the sum (a smaller share underflows to NaN rows)", w, float64(MinRandShare))
	}
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// String names the configuration, for a store's meta.json source field.
func (c Config) String() string {
	c = c.WithDefaults()
	return fmt.Sprintf("synth(seed=%d model_seed=%d texts=%d tokens=%d..%d d=%d e=%d dtype=%s norm=%g±%g pr=%.1f outliers=%d vocab=%d zipf=%g,%g frozen=%g weights=%g/%g/%g/%g/%g)",
		c.Seed, c.ModelSeed, c.Texts, c.MinTokens, c.MaxTokens, c.D, c.E, c.DType, c.NormMean, c.NormCV, c.PR, c.Outliers,
		c.Vocab, c.ZipfS, c.ZipfV, c.FrozenMass, c.Weights.Mean, c.Weights.Outlier, c.Weights.Text, c.Weights.Token, c.Weights.Noise)
}

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
	{Key: "norm_mean", Bounds: field.Bounds{Min: MinNormMean, Max: MaxNormMean}, Get: func(c Config) float64 { return c.NormMean }},
	{Key: "norm_cv", Bounds: field.Bounds{Min: 1e-6, Max: 0.3, Zero: "the default 0.04"}, Get: func(c Config) float64 { return c.NormCV }},
	{Key: "pr", Bounds: field.Bounds{Min: 1, Max: 1 << 16, Zero: "120*sqrt(d/4096)"}, Get: func(c Config) float64 { return c.PR }},
	{Key: "outliers", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "d/1024 clamped to [2, 8]"}, Get: func(c Config) float64 { return float64(c.Outliers) }},
	{Key: "vocab", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 24}, Get: func(c Config) float64 { return float64(c.Vocab) }},
	{Key: "zipf_s", Bounds: field.Bounds{Min: 1, Max: MaxZipfS, MinOpen: true}, Get: func(c Config) float64 { return c.ZipfS }},
	{Key: "zipf_v", Bounds: field.Bounds{Min: 1, Max: MaxZipfV}, Get: func(c Config) float64 { return c.ZipfV }},
	{Key: "frozen_mass", Bounds: field.Bounds{Min: 1e-6, Max: 1, MaxOpen: true, Zero: "the default 0.05"}, Get: func(c Config) float64 { return c.FrozenMass }},
	{Key: "weights.mean", Bounds: field.Bounds{Min: 0, Max: MaxWeight}, Get: func(c Config) float64 { return c.Weights.Mean }},
	{Key: "weights.outlier", Bounds: field.Bounds{Min: 0, Max: MaxWeight}, Get: func(c Config) float64 { return c.Weights.Outlier }},
	{Key: "weights.text", Bounds: field.Bounds{Min: 0, Max: MaxWeight}, Get: func(c Config) float64 { return c.Weights.Text }},
	{Key: "weights.token", Bounds: field.Bounds{Min: 0, Max: MaxWeight}, Get: func(c Config) float64 { return c.Weights.Token }},
	{Key: "weights.noise", Bounds: field.Bounds{Min: 0, Max: MaxWeight}, Get: func(c Config) float64 { return c.Weights.Noise }},
}
