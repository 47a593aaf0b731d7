package equality

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// Storage precisions of the accelerator (Config.Precisions).
const (
	FP32 = "fp32" // IEEE binary32: U and Y as computed
	BF16 = "bf16" // bfloat16: 8 significant bits, float32's range
	FP16 = "fp16" // IEEE binary16: 11 significant bits, |x| < 65520, subnormals below 2^-14
)

// Precisions of the trusted side's mixing and unmixing arithmetic (Config.Trusted).
const (
	TrustedFP64 = "fp64"
	TrustedFP32 = "fp32"
)

// Config is one equality run. DefaultConfig gives the documented defaults; Run uses a Config as
// given (no field is filled in implicitly except an empty Layers), and Validate names every bad
// field. Lists are flag-friendly: a CLI can parse comma-separated values straight into them.
type Config struct {
	// ModelDir holds config.json, tokenizer.json and one *.safetensors of a BERT encoder.
	// Default: corpus.DefaultModelDir() (the cached all-MiniLM-L6-v2; $GELOATTACK_MODEL overrides).
	ModelDir string
	// TextsSource is what corpus.ReadSource reads: a scripts/fetch-data.sh corpus directory, a
	// .jsonl file or a one-text-per-line file. Default: corpus.DefaultCorpusDir().
	TextsSource string
	// Corpora selects corpora of a corpus directory (fortunes, wordnet, sotu); empty: all present.
	Corpora []string
	// Texts is how many texts of the source are evaluated: its first Texts in its order (a corpus
	// directory's order mixes the corpora). At least 2 (a nearest neighbour needs another text).
	// Default 200.
	Texts int
	// MaxTokens truncates each text to this many tokens, [CLS] and [SEP] included; 2..the model's
	// max_position_embeddings. Default 256 (what scripts/build-store.sh extracts with).
	MaxTokens int

	// Layers are the blocks (1..num_hidden_layers, numbered like `store extract -layer`) whose
	// query, key, value and output projections go through GELO. Empty: all. Default empty.
	Layers []int
	// Precisions are the accelerator's storage formats to evaluate: fp32, bf16, fp16.
	// Default fp32, bf16, fp16.
	Precisions []string
	// Orthogonal includes the Haar-orthogonal mix. Default true.
	Orthogonal bool
	// Kappas are the condition numbers of the non-orthogonal mixes, each finite and >= 1.
	// Default 1, 10, 100, 1000. At least one mix (Orthogonal or a kappa) is required.
	Kappas []float64
	// ShieldFrac gives k = ceil(ShieldFrac * t) shield rows for a text of t tokens, in [0, 1];
	// 0: no shields. Default 0.05 (the paper's recommendation: ~5% of rows).
	ShieldFrac float64
	// ShieldScale is the shield rows' expected norm relative to the mean row norm of the
	// projection's input rows of the text; > 0. Default 4 (the paper recommends 4-10).
	ShieldScale float64
	// Seed roots every random stream (A and shields). Default 0.
	Seed uint64
	// Trusted is the precision of the trusted side's arithmetic (A, mix, unmix): fp64 or fp32.
	// Default fp64.
	Trusted string
	// RoundWeights also rounds W to the storage precision on the accelerator (a model held in
	// bf16/fp16). It applies to the precision-only runs too. Default false: W stays float32.
	RoundWeights bool
	// BatchTokens is the token budget of one forward batch (texts are packed without padding);
	// at least MaxTokens. Default 2048.
	BatchTokens int
	// Workers is the number of goroutines of the forward pass and of the per-text protocol work
	// (< 1: GOMAXPROCS). Default 0.
	Workers int
}

// DefaultConfig returns the documented defaults. ModelDir and TextsSource are empty when there
// is no user cache directory.
func DefaultConfig() Config {
	model, _ := corpus.DefaultModelDir()
	texts, _ := corpus.DefaultCorpusDir()
	return Config{
		ModelDir:    model,
		TextsSource: texts,
		Texts:       200,
		MaxTokens:   256,
		Precisions:  []string{FP32, BF16, FP16},
		Orthogonal:  true,
		Kappas:      []float64{1, 10, 100, 1000},
		ShieldFrac:  0.05,
		ShieldScale: 4,
		Trusted:     TrustedFP64,
		BatchTokens: 2048,
	}
}

// Validate checks every field that needs no model, and reports all offending ones, each named.
func (c Config) Validate() error {
	errs := c.validateProtocol()
	if c.ModelDir == "" {
		errs = append(errs, errors.New("ModelDir: empty, want the model directory"))
	}
	if c.TextsSource == "" {
		errs = append(errs, errors.New("TextsSource: empty, want a corpus directory or a text file"))
	}
	if c.Texts < 2 {
		errs = append(errs, fmt.Errorf("Texts: %d, want >= 2 (a nearest neighbour needs another text)", c.Texts))
	}
	if c.MaxTokens < 2 {
		errs = append(errs, fmt.Errorf("MaxTokens: %d, want >= 2 ([CLS] and [SEP])", c.MaxTokens))
	}
	if c.BatchTokens < c.MaxTokens && c.BatchTokens >= 1 {
		errs = append(errs, fmt.Errorf("BatchTokens: %d is below MaxTokens %d", c.BatchTokens, c.MaxTokens))
	}
	if len(errs) > 0 {
		return fmt.Errorf("equality config: %w", errors.Join(errs...))
	}
	return nil
}

// validateProtocol checks the fields Evaluate uses.
func (c Config) validateProtocol() []error {
	var errs []error
	for _, l := range c.Layers {
		if l < 1 {
			errs = append(errs, fmt.Errorf("Layers: %d, want blocks numbered from 1 (1..num_hidden_layers)", l))
		}
	}
	if dup := duplicate(c.Layers); dup != "" {
		errs = append(errs, fmt.Errorf("Layers: %s listed twice", dup))
	}
	if len(c.Precisions) == 0 {
		errs = append(errs, errors.New("Precisions: empty, want some of fp32, bf16, fp16"))
	}
	for _, p := range c.Precisions {
		if p != FP32 && p != BF16 && p != FP16 {
			errs = append(errs, fmt.Errorf("Precisions: %q, want fp32, bf16 or fp16", p))
		}
	}
	if dup := duplicate(c.Precisions); dup != "" {
		errs = append(errs, fmt.Errorf("Precisions: %s listed twice", dup))
	}
	if !c.Orthogonal && len(c.Kappas) == 0 {
		errs = append(errs, errors.New("Kappas: empty and Orthogonal false: no mix to evaluate"))
	}
	for _, k := range c.Kappas {
		if !(k >= 1) || math.IsInf(k, 0) {
			errs = append(errs, fmt.Errorf("Kappas: %v, want finite values >= 1 (cond(A))", k))
		}
	}
	if dup := duplicate(c.Kappas); dup != "" {
		errs = append(errs, fmt.Errorf("Kappas: %s listed twice", dup))
	}
	if !(c.ShieldFrac >= 0 && c.ShieldFrac <= 1) {
		errs = append(errs, fmt.Errorf("ShieldFrac: %v, want a value in [0, 1]", c.ShieldFrac))
	}
	if !(c.ShieldScale > 0) || math.IsInf(c.ShieldScale, 0) {
		errs = append(errs, fmt.Errorf("ShieldScale: %v, want a finite value > 0", c.ShieldScale))
	}
	if c.Trusted != TrustedFP64 && c.Trusted != TrustedFP32 {
		errs = append(errs, fmt.Errorf("Trusted: %q, want fp64 or fp32", c.Trusted))
	}
	if c.BatchTokens < 1 {
		errs = append(errs, fmt.Errorf("BatchTokens: %d, want >= 1", c.BatchTokens))
	}
	return errs
}

// duplicate returns the first value of xs that occurs twice, formatted, or "".
func duplicate[T comparable](xs []T) string {
	for i, x := range xs {
		if slices.Contains(xs[i+1:], x) {
			return fmt.Sprint(x)
		}
	}
	return ""
}

// Mix is one way of drawing A.
type Mix struct {
	// Orthogonal is a Haar-orthogonal A; otherwise A = Q1 diag(s) Q2^T with cond(A) = Kappa.
	Orthogonal bool
	// Kappa is cond(A): 1 for orthogonal A.
	Kappa float64
}

// Name is "orthogonal" or "kappa=K", as the report prints it.
func (m Mix) Name() string {
	if m.Orthogonal {
		return "orthogonal"
	}
	return "kappa=" + strconv.FormatFloat(m.Kappa, 'g', -1, 64)
}

// key identifies the mix in random-stream keys: 0 for orthogonal, else kappa's bits (never 0
// for kappa >= 1).
func (m Mix) key() uint64 {
	if m.Orthogonal {
		return 0
	}
	return math.Float64bits(m.Kappa)
}

// mixes lists the configured mixes: orthogonal first, then the kappas in the order given.
func (c Config) mixes() []Mix {
	var out []Mix
	if c.Orthogonal {
		out = append(out, Mix{Orthogonal: true, Kappa: 1})
	}
	for _, k := range c.Kappas {
		out = append(out, Mix{Kappa: k})
	}
	return out
}

// roundTo rounds x in place to the storage precision p (fp32: unchanged).
func roundTo(p string, x []float32) {
	switch p {
	case BF16:
		numfmt.RoundBF16s(x)
	case FP16:
		numfmt.RoundF16s(x)
	}
}
