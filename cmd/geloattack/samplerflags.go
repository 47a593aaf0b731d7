package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"

	"github.com/gelo-research/geloattack/data/gelo"
)

// samplerOverrides are the flags that change a GELO sampler setting of the config (the deployer's
// side: shields, mixing, observation), shared by the training-free attacks on real models. A flag
// left out keeps the config's value; a flag given sets it, whatever the value (there is no
// "keep" value: a given value the sampler refuses is an error).
type samplerOverrides struct {
	shieldKind, dtype             *optString
	shieldScale, shieldFrac       *optFloat
	obsRows, kappa                *optFloat
	shieldRows, positives, tokens *optInt
}

// optFloat is a float flag that records whether it was given; check refuses a value at parse time.
type optFloat struct {
	v     float64
	set   bool
	check func(float64) error
}

func (o *optFloat) String() string { return strconv.FormatFloat(o.v, 'g', -1, 64) }

func (o *optFloat) Set(s string) error {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Errorf("%q is not a finite number", s)
	}
	if o.check != nil {
		if err := o.check(x); err != nil {
			return err
		}
	}
	o.v, o.set = x, true
	return nil
}

// optString is a string flag that records whether it was given; an empty value is refused.
type optString struct {
	v   string
	set bool
}

func (o *optString) String() string { return o.v }

func (o *optString) Set(s string) error {
	if s == "" {
		return errors.New("empty: leave the flag out to keep the config's value")
	}
	o.v, o.set = s, true
	return nil
}

// addSamplerOverrides defines the override flags on fs; positivesUsage says what a positive is to
// the command, and withTokens adds -tokens-per-text (a command that takes whole texts leaves it out).
func addSamplerOverrides(fs *flag.FlagSet, positivesUsage string, withTokens bool) *samplerOverrides {
	o := &samplerOverrides{
		shieldKind: &optString{},
		dtype:      &optString{},
		shieldScale: &optFloat{check: func(x float64) error {
			if x == 0 {
				return errors.New("0: shields of norm 0 are no shields; for none give -shield-frac 0")
			}
			if x < 0 {
				return fmt.Errorf("%g: want > 0", x)
			}
			return nil
		}},
		shieldFrac: &optFloat{check: func(x float64) error {
			if x < 0 || x > 1 {
				return fmt.Errorf("%g: want a fraction in [0, 1]", x)
			}
			return nil
		}},
		obsRows: &optFloat{check: func(x float64) error {
			if !(x > 0 && x <= 1) {
				return fmt.Errorf("%g: want a fraction in (0, 1]", x)
			}
			return nil
		}},
		kappa: &optFloat{check: func(x float64) error {
			if x < 1 {
				return fmt.Errorf("%g: want cond(A) >= 1 (leave -kappa out for the config's mixing)", x)
			}
			return nil
		}},
		shieldRows: overrideInt(fs, "shield-rows", "sampler.shield_rows", "a fixed shield count"),
		positives:  overrideInt(fs, "positives", "sampler.positives", positivesUsage),
		tokens:     &optInt{},
	}
	fs.Var(o.shieldKind, "shield-kind", "override sampler.shield_kind: gaussian | manifold | student_t (left out: the config's)")
	fs.Var(o.shieldScale, "shield-scale", "override sampler.shield_scale (> 0; left out: the config's). For no shields give -shield-frac 0")
	fs.Var(o.shieldFrac, "shield-frac", "override sampler.shield_frac in [0, 1] (left out: the config's)")
	fs.Var(o.obsRows, "obs-rows", "override sampler.obs_rows in (0, 1] (left out: the config's)")
	fs.Var(o.dtype, "observe-dtype", "override sampler.observe_dtype: none | bf16 | fp16 (left out: the config's)")
	fs.Var(o.kappa, "kappa", "non-orthogonal mixing with cond(A) = kappa (>= 1; left out: the config's mix)")
	if withTokens {
		o.tokens = overrideInt(fs, "tokens-per-text", "sampler.tokens_per_text", "")
	}
	return o
}

// apply writes the flags that were given into sc; the caller validates the result.
func (o *samplerOverrides) apply(sc *gelo.Config) {
	if o.shieldKind.set {
		sc.ShieldKind = gelo.ShieldKind(o.shieldKind.v)
	}
	if o.shieldScale.set {
		sc.ShieldScale = gelo.Fixed(o.shieldScale.v)
	}
	if o.shieldFrac.set {
		sc.ShieldFrac = gelo.Fixed(o.shieldFrac.v)
	}
	o.shieldRows.apply(&sc.ShieldRows)
	if o.obsRows.set {
		sc.ObsRows = o.obsRows.v
	}
	if o.dtype.set {
		sc.ObserveDtype = gelo.ObserveDtype(o.dtype.v)
	}
	if o.kappa.set {
		sc.Mix, sc.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(o.kappa.v)
	}
	if o.positives.set {
		sc.Positives = gelo.Fixed(float64(o.positives.v))
	}
	if o.tokens.set {
		sc.TokensPerText = gelo.Fixed(float64(o.tokens.v))
	}
}
