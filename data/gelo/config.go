package gelo

import (
	"errors"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/internal/field"
)

// TokenSampling says how the rows of a positive text are chosen.
type TokenSampling string

const (
	// TokenWindow takes t contiguous rows at a uniformly random offset.
	TokenWindow TokenSampling = "window"
	// TokenRandom takes t distinct uniformly random rows, kept in position order.
	TokenRandom TokenSampling = "random"
)

// ShieldKind says how the secret shield rows S are made.
type ShieldKind string

const (
	// ShieldGaussian draws i.i.d. N(0, sigma^2) entries, sigma = scale*m/sqrt(d).
	ShieldGaussian ShieldKind = "gaussian"
	// ShieldStudentT draws i.i.d. Student-t(df) entries rescaled to the same sigma.
	ShieldStudentT ShieldKind = "student_t"
	// ShieldManifold uses real rows of other texts of the same split, rescaled to norm scale*m.
	ShieldManifold ShieldKind = "manifold"
)

// MixKind says how the secret mixing matrix A is drawn.
type MixKind string

const (
	// MixOrthogonal draws A from the Haar measure on O(n).
	MixOrthogonal MixKind = "orthogonal"
	// MixNonOrthogonal draws A = Q1 diag(s) Q2^T with cond(A) = kappa exactly.
	MixNonOrthogonal MixKind = "non_orthogonal"
)

// ObserveDtype is the storage format the accelerator holds U in.
type ObserveDtype string

const (
	// ObserveNone leaves U in float32.
	ObserveNone ObserveDtype = "none"
	// ObserveBF16 rounds U to bfloat16 (round to nearest, ties to even).
	ObserveBF16 ObserveDtype = "bf16"
	// ObserveFP16 rounds U to IEEE binary16 (round to nearest, ties to even, subnormals kept,
	// overflow to infinity).
	ObserveFP16 ObserveDtype = "fp16"
)

// Config is everything that decides how obfuscated examples are drawn (SPEC §3). The YAML and JSON
// names are the SPEC's. Ranges (positives, tokens_per_text, shield_frac, shield_scale, mix_cond) are
// drawn once per example; see Range for the accepted forms.
type Config struct {
	// Seed roots every random stream; example i of a split depends on (Seed, split, i) only. Default 0.
	Seed uint64 `yaml:"seed" json:"seed"`
	// ValFrac is the fraction of texts held out as val (data.SplitOf), in (0, 1). Default 0.1.
	ValFrac float64 `yaml:"val_frac" json:"val_frac"`
	// Positives is the number p of distinct texts per example: an integer range, >= 1. Default 4.
	Positives Range `yaml:"positives" json:"positives"`
	// TokensPerText is the number t of rows taken from each positive: an integer range, >= 1.
	// One t is drawn per example. Texts shorter than t give all their rows. Default 64.
	TokensPerText Range `yaml:"tokens_per_text" json:"tokens_per_text"`
	// TokenSampling is window (contiguous, random offset) or random (distinct positions). Default window.
	TokenSampling TokenSampling `yaml:"token_sampling" json:"token_sampling"`
	// Center subtracts the per-feature mean of the clean rows from H (and from manifold shield rows,
	// so that they keep looking like H's rows). Default false.
	Center bool `yaml:"center" json:"center"`
	// ShieldKind is gaussian, student_t or manifold. Default gaussian.
	ShieldKind ShieldKind `yaml:"shield_kind" json:"shield_kind"`
	// StudentTDF is the degrees of freedom of student_t shields; > 2 so the variance exists. Default 3.
	StudentTDF float64 `yaml:"student_t_df" json:"student_t_df"`
	// ShieldRows, when > 0, is the fixed shield count k and ShieldFrac is ignored. Default 0.
	ShieldRows int `yaml:"shield_rows" json:"shield_rows"`
	// ShieldFrac gives k = ceil(shield_frac * n_clean) when ShieldRows is 0; in [0, 1] (more shields
	// than clean rows: use shield_rows). Default 0.1.
	ShieldFrac Range `yaml:"shield_frac" json:"shield_frac"`
	// ShieldScale is the shield norm relative to m, the mean row norm of H; > 0. Default 1.
	ShieldScale Range `yaml:"shield_scale" json:"shield_scale"`
	// Mix is orthogonal or non_orthogonal. Default orthogonal.
	Mix MixKind `yaml:"mix" json:"mix"`
	// MixCond is kappa = cond(A) for non_orthogonal mixing, >= 1; ignored (kappa = 1) for orthogonal.
	// Default 1.
	MixCond Range `yaml:"mix_cond" json:"mix_cond"`
	// ObsRows is the observed fraction of U's rows, in (0, 1]: ceil(obs_rows * n) rows are kept.
	// Default 1.
	ObsRows float64 `yaml:"obs_rows" json:"obs_rows"`
	// ObserveDtype is none, bf16 or fp16. Default none.
	ObserveDtype ObserveDtype `yaml:"observe_dtype" json:"observe_dtype"`
	// Call salts the streams of the shields, A and the observed rows (not the texts, windows or
	// per-example parameters): GELO draws a fresh A and fresh shields for every protected GEMM
	// call, so the blocks of one forward pass are the same example (same texts) under Call 1,
	// 2, ... Not a config key; 0 (the default) leaves every stream as it always was.
	Call uint64 `yaml:"-" json:"-"`
}

// DefaultConfig returns the documented defaults: 4 positives of 64 window tokens each, 10% gaussian
// shields at scale 1, orthogonal mixing, every row observed in float32.
func DefaultConfig() Config {
	return Config{
		Seed:          0,
		ValFrac:       0.1,
		Positives:     Fixed(4),
		TokensPerText: Fixed(64),
		TokenSampling: TokenWindow,
		ShieldKind:    ShieldGaussian,
		StudentTDF:    3,
		ShieldFrac:    Fixed(0.1),
		ShieldScale:   Fixed(1),
		Mix:           MixOrthogonal,
		MixCond:       Fixed(1),
		ObsRows:       1,
		ObserveDtype:  ObserveNone,
	}
}

// Validate checks every field and reports all offending ones, each named by its YAML key with the
// value found and the range allowed.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range []struct {
		key string
		r   Range
	}{{"positives", c.Positives}, {"tokens_per_text", c.TokensPerText}, {"shield_frac", c.ShieldFrac},
		{"shield_scale", c.ShieldScale}, {"mix_cond", c.MixCond}} {
		add(r.r.validate(r.key))
	}
	if len(errs) == 0 {
		add(Rules.Check(c))
	}
	switch c.TokenSampling {
	case TokenWindow, TokenRandom:
	default:
		add(field.Errorf("token_sampling", "%q, want window or random", c.TokenSampling))
	}
	switch c.ShieldKind {
	case ShieldGaussian, ShieldManifold, ShieldStudentT:
	default:
		add(field.Errorf("shield_kind", "%q, want gaussian, student_t or manifold", c.ShieldKind))
	}
	if c.Center && c.Positives.Min*c.TokensPerText.Min < 2 {
		// One centred row is the zero vector: m = 0 and every shield would be zero too.
		add(field.Errorf("center", "true with positives %s x tokens_per_text %s can leave a single clean row, which centring makes zero; want at least 2 clean rows", c.Positives, c.TokensPerText))
	}
	switch c.Mix {
	case MixOrthogonal, MixNonOrthogonal:
	default:
		add(field.Errorf("mix", "%q, want orthogonal or non_orthogonal", c.Mix))
	}
	switch c.ObserveDtype {
	case ObserveNone, ObserveBF16, ObserveFP16:
	default:
		add(field.Errorf("observe_dtype", "%q, want none, bf16 or fp16", c.ObserveDtype))
	}
	if len(errs) > 0 {
		return fmt.Errorf("gelo config: %w", errors.Join(errs...))
	}
	return nil
}

// Rules is every numeric field of Config with its bounds (a range's min and max both within them):
// Validate checks them. The maxima are far above any real example; they keep a value from reaching
// an allocation that panics or a float32 that overflows.
var Rules = field.Table[Config]{
	{Key: "val_frac", Bounds: field.Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true}, Get: func(c Config) float64 { return c.ValFrac }},
	{Key: "positives", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16},
		Lo: func(c Config) float64 { return c.Positives.Min }, Get: func(c Config) float64 { return c.Positives.Max }},
	{Key: "tokens_per_text", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16},
		Lo: func(c Config) float64 { return c.TokensPerText.Min }, Get: func(c Config) float64 { return c.TokensPerText.Max }},
	// The variance of a student_t shield exists only above 2 degrees of freedom.
	{Key: "student_t_df", Bounds: field.Bounds{Min: 2, Max: 1e6, MinOpen: true}, Get: func(c Config) float64 { return c.StudentTDF },
		When: func(c Config) bool { return c.ShieldKind == ShieldStudentT }},
	{Key: "shield_rows", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "use shield_frac"}, Get: func(c Config) float64 { return float64(c.ShieldRows) }},
	{Key: "shield_frac", Bounds: field.Bounds{Min: 0, Max: 1},
		Lo: func(c Config) float64 { return c.ShieldFrac.Min }, Get: func(c Config) float64 { return c.ShieldFrac.Max },
		When: func(c Config) bool { return c.ShieldRows == 0 }},
	{Key: "shield_scale", Bounds: field.Bounds{Min: 1e-6, Max: 1e6},
		Lo: func(c Config) float64 { return c.ShieldScale.Min }, Get: func(c Config) float64 { return c.ShieldScale.Max }},
	{Key: "mix_cond", Bounds: field.Bounds{Min: 1, Max: 1e12},
		Lo: func(c Config) float64 { return c.MixCond.Min }, Get: func(c Config) float64 { return c.MixCond.Max },
		When: func(c Config) bool { return c.Mix == MixNonOrthogonal }},
	{Key: "obs_rows", Bounds: field.Bounds{Min: 1e-6, Max: 1}, Get: func(c Config) float64 { return c.ObsRows }},
}

// MaxTexts is the largest number of positives an example can draw.
func (c Config) MaxTexts() int { return int(c.Positives.Max) }

// MaxN is an upper bound on the rows n of X (and so on a batch's set size) over all examples:
// p_max * t_max clean rows plus the most shields they can get.
func (c Config) MaxN() int {
	clean := int(c.Positives.Max) * int(c.TokensPerText.Max)
	return clean + c.shieldCount(c.ShieldFrac.Max, clean)
}

// SetSizeVaries reports whether the config draws examples of different set sizes by design: a
// ranged number of positives, tokens per text or shield fraction. (Texts shorter than
// tokens_per_text also shorten a set, but only a few sizes below MaxN.)
func (c Config) SetSizeVaries() bool {
	ranged := func(r Range) bool { return r.Min != r.Max }
	return ranged(c.Positives) || ranged(c.TokensPerText) || (c.ShieldRows == 0 && ranged(c.ShieldFrac))
}

// DefaultSetBucket is the set-size bucket used when a run does not choose one: 32 rows when the
// set size varies by design (so that shapes repeat and memory stops growing), else 1 (padding
// only to the batch's largest example, which leaves fixed-size runs bit-identical to unpadded ones).
func (c Config) DefaultSetBucket() int {
	if c.SetSizeVaries() {
		return 32
	}
	return 1
}

// shieldCount is k for a drawn shield fraction and n_clean clean rows.
func (c Config) shieldCount(frac float64, nClean int) int {
	if c.ShieldRows > 0 {
		return c.ShieldRows
	}
	return ceilCount(frac * float64(nClean))
}

// ceilCount is ceil(x) for counts, tolerant of the round-off in products such as 0.55*100 =
// 55.00000000000001, which must give 55 rows, not 56.
func ceilCount(x float64) int {
	return int(math.Ceil(x - 1e-9))
}
