package synth

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/synth/synthcfg"
)

// floatFields are the float keys of Config with a setter, for the hostile family.
var floatFields = []struct {
	key string
	set func(c *Config, v float64)
}{
	{"norm_mean", func(c *Config, v float64) { c.NormMean = v }},
	{"norm_cv", func(c *Config, v float64) { c.NormCV = v }},
	{"pr", func(c *Config, v float64) { c.PR = v }},
	{"zipf_s", func(c *Config, v float64) { c.ZipfS = v }},
	{"zipf_v", func(c *Config, v float64) { c.ZipfV = v }},
	{"frozen_mass", func(c *Config, v float64) { c.FrozenMass = v }},
	{"weights.mean", func(c *Config, v float64) { c.Weights.Mean = v }},
	{"weights.outlier", func(c *Config, v float64) { c.Weights.Outlier = v }},
	{"weights.text", func(c *Config, v float64) { c.Weights.Text = v }},
	{"weights.token", func(c *Config, v float64) { c.Weights.Token = v }},
	{"weights.noise", func(c *Config, v float64) { c.Weights.Noise = v }},
}

// Every float field × {NaN, ±Inf, ±1e300, ±1e-300} is either refused by Validate, naming the
// key, or generates a corpus whose rows and embeddings are all finite. Before, zipf_s = +Inf
// hung math/rand's Zipf sampler forever, NaN weights passed (NaN < 0 is false) and gave NaN
// rows, and norm_mean = 1e-300 gave rows that round to zero (NaN at the first training step).
func TestFloatFieldsAreRefusedOrWork(t *testing.T) {
	values := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e300, 1e-300, -1e-300}
	for _, f := range floatFields {
		for _, v := range values {
			cfg := small(12, 16, 8)
			cfg.Vocab, cfg.MinTokens, cfg.MaxTokens = 64, 4, 8
			f.set(&cfg, v)
			err := cfg.Validate()
			if err != nil {
				if !strings.Contains(err.Error(), f.key) {
					t.Errorf("%s = %v: refusal %q does not name the key", f.key, v, err)
				}
				continue
			}
			c, err := Generate(cfg)
			if err != nil {
				t.Errorf("%s = %v: validated, then Generate failed: %v", f.key, v, err)
				continue
			}
			for i := 0; i < c.NumTexts(); i++ {
				for _, x := range append(rowsOf(t, c, i), embOf(t, c, i)...) {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s = %v: validated, then text %d holds %v", f.key, v, i, x)
					}
				}
			}
		}
	}
}

// The bounds themselves generate finite corpora (a bound that still hangs or overflows would be
// no bound).
func TestFloatBoundsWork(t *testing.T) {
	for _, edit := range []func(c *Config){
		func(c *Config) { c.ZipfS = synthcfg.MaxZipfS },
		func(c *Config) { c.ZipfV = synthcfg.MaxZipfV },
		func(c *Config) { c.ZipfS, c.ZipfV = math.Nextafter(1, 2), 1 },
		func(c *Config) { c.NormMean = synthcfg.MinNormMean },
		func(c *Config) { c.NormMean = synthcfg.MaxNormMean },
		func(c *Config) {
			c.Weights = Weights{Mean: synthcfg.MaxWeight, Text: synthcfg.MinRandShare * synthcfg.MaxWeight * 1.01}
		},
	} {
		cfg := small(12, 16, 8)
		cfg.Vocab, cfg.MinTokens, cfg.MaxTokens = 64, 4, 8
		edit(&cfg)
		c, err := Generate(cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		for i := 0; i < c.NumTexts(); i++ {
			for _, x := range append(rowsOf(t, c, i), embOf(t, c, i)...) {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("%+v: text %d holds %v", cfg, i, x)
				}
			}
		}
	}
}

// A cancelled context stops generation with its error.
func TestGenerateStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GenerateContext(ctx, small(5000, 64, 8)); !errors.Is(err, context.Canceled) {
		t.Fatalf("GenerateContext on a cancelled context: %v", err)
	}
}
