package main

import (
	"flag"

	"github.com/gelo-research/geloattack/data/gelo"
)

// samplerOverrides are the flags that change a GELO sampler setting of the config (the deployer's
// side: shields, mixing, observation), shared by the training-free attacks on real models.
type samplerOverrides struct {
	shieldKind, dtype             *string
	shieldScale, shieldFrac       *float64
	obsRows, kappa                *float64
	shieldRows, positives, tokens *optInt
}

// addSamplerOverrides defines the override flags on fs; positivesUsage says what a positive is to
// the command, and withTokens adds -tokens-per-text (a command that takes whole texts leaves it out).
func addSamplerOverrides(fs *flag.FlagSet, positivesUsage string, withTokens bool) *samplerOverrides {
	o := &samplerOverrides{
		shieldKind:  fs.String("shield-kind", "", "override sampler.shield_kind: gaussian | manifold | student_t"),
		shieldScale: fs.Float64("shield-scale", -1, "override sampler.shield_scale (> 0; -1 keep). Scale 0 is -shield-frac 0"),
		shieldFrac:  fs.Float64("shield-frac", -1, "override sampler.shield_frac in [0, 1] (-1 keep)"),
		shieldRows:  overrideInt(fs, "shield-rows", "sampler.shield_rows", "a fixed shield count"),
		obsRows:     fs.Float64("obs-rows", 0, "override sampler.obs_rows in (0, 1] (0 keep)"),
		dtype:       fs.String("observe-dtype", "", "override sampler.observe_dtype: none | bf16 | fp16"),
		kappa:       fs.Float64("kappa", 0, "non-orthogonal mixing with cond(A) = kappa (>= 1; 0 keep the config's mix)"),
		positives:   overrideInt(fs, "positives", "sampler.positives", positivesUsage),
		tokens:      &optInt{},
	}
	if withTokens {
		o.tokens = overrideInt(fs, "tokens-per-text", "sampler.tokens_per_text", "")
	}
	return o
}

// apply writes the flags that were given into sc; the caller validates the result.
func (o *samplerOverrides) apply(sc *gelo.Config) {
	if *o.shieldKind != "" {
		sc.ShieldKind = gelo.ShieldKind(*o.shieldKind)
	}
	if *o.shieldScale != -1 {
		sc.ShieldScale = gelo.Fixed(*o.shieldScale)
	}
	if *o.shieldFrac != -1 {
		sc.ShieldFrac = gelo.Fixed(*o.shieldFrac)
	}
	o.shieldRows.apply(&sc.ShieldRows)
	if *o.obsRows != 0 {
		sc.ObsRows = *o.obsRows
	}
	if *o.dtype != "" {
		sc.ObserveDtype = gelo.ObserveDtype(*o.dtype)
	}
	if *o.kappa != 0 {
		sc.Mix, sc.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(*o.kappa)
	}
	if o.positives.set {
		sc.Positives = gelo.Fixed(float64(o.positives.v))
	}
	if o.tokens.set {
		sc.TokensPerText = gelo.Fixed(float64(o.tokens.v))
	}
}
