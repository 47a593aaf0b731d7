package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
)

// The sampler-override set: the flags that change a GELO sampler setting of the config (the
// deployer's side: shields, mixing, observation, the example's texts), defined once here and
// taken by every command that draws GELO examples (train, eval, baseline, recover, decode). A
// flag left out keeps the config's value; a flag given sets it. "Given" is the flag package's own
// record (flag.FlagSet.Visit), so no value means "keep": a numeric value outside the field's rule
// (gelo.Rules, in field.Bounds wording) is refused when the flag is parsed.

// samplerOverride is one flag of the set.
type samplerOverride struct {
	// name is the flag; key the sampler's YAML key it sets (its rule in gelo.Rules when numeric).
	name, key string
	// usage is what the help says after "override sampler.<key>"; note follows the range.
	usage, note string
	// values, for a string field, are the values it takes (nil: a number field).
	values []string
	// hint follows a refusal: what to give instead.
	hint string
	// set writes a given value into the sampler settings (a number, or one of values).
	set func(sc *gelo.Config, num float64, str string)
}

// samplerOverrides is the set, in the order the help would list them unsorted.
var samplerOverrides = []samplerOverride{
	{name: "positives", key: "positives", usage: "texts per example",
		set: func(sc *gelo.Config, x float64, _ string) { sc.Positives = gelo.Fixed(x) }},
	{name: "tokens-per-text", key: "tokens_per_text", usage: "rows taken from each text",
		set: func(sc *gelo.Config, x float64, _ string) { sc.TokensPerText = gelo.Fixed(x) }},
	{name: "shield-kind", key: "shield_kind",
		values: []string{string(gelo.ShieldGaussian), string(gelo.ShieldManifold), string(gelo.ShieldStudentT)},
		set:    func(sc *gelo.Config, _ float64, s string) { sc.ShieldKind = gelo.ShieldKind(s) }},
	{name: "shield-rows", key: "shield_rows", usage: "a fixed shield count",
		set: func(sc *gelo.Config, x float64, _ string) { sc.ShieldRows = int(x) }},
	{name: "shield-frac", key: "shield_frac", usage: "shield rows as a fraction of the clean rows",
		set: func(sc *gelo.Config, x float64, _ string) { sc.ShieldFrac = gelo.Fixed(x) }},
	{name: "shield-scale", key: "shield_scale", usage: "the shields' norm relative to the mean row norm",
		note: "For no shields give -shield-frac 0", hint: "shields of norm 0 are no shields: for none give -shield-frac 0",
		set: func(sc *gelo.Config, x float64, _ string) { sc.ShieldScale = gelo.Fixed(x) }},
	{name: "kappa", key: "mix_cond", usage: "with non-orthogonal mixing: cond(A) = kappa",
		note: "Given, sampler.mix is non_orthogonal",
		set: func(sc *gelo.Config, x float64, _ string) {
			sc.Mix, sc.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(x)
		}},
	{name: "obs-rows", key: "obs_rows", usage: "the observed fraction of U's rows",
		set: func(sc *gelo.Config, x float64, _ string) { sc.ObsRows = x }},
	{name: "observe-dtype", key: "observe_dtype",
		values: []string{string(gelo.ObserveNone), string(gelo.ObserveBF16), string(gelo.ObserveFP16)},
		set:    func(sc *gelo.Config, _ float64, s string) { sc.ObserveDtype = gelo.ObserveDtype(s) }},
}

// samplerFlag is the value of one override flag: parsed and checked when given.
type samplerFlag struct {
	o   *samplerOverride
	num float64
	str string
}

func (f *samplerFlag) String() string {
	switch {
	case f == nil || f.o == nil:
		return ""
	case f.o.values != nil:
		return f.str
	}
	return field.Num(f.num)
}

func (f *samplerFlag) Set(s string) error {
	if f.o.values != nil {
		if s == "" {
			return errors.New("empty: leave the flag out to keep the config's value")
		}
		if !slices.Contains(f.o.values, s) {
			return fmt.Errorf("want %s", strings.Join(f.o.values, " | "))
		}
		f.str = s
		return nil
	}
	b := gelo.Rules.Bounds(f.o.key)
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || !b.Allows(x) {
		msg := "want " + b.Want()
		if err != nil {
			msg = "not a number: " + msg
		}
		if f.o.hint != "" {
			msg += "; " + f.o.hint
		}
		return errors.New(msg)
	}
	f.num = x
	return nil
}

// help is the override's line in the help.
func (o *samplerOverride) help(positives string) string {
	usage := o.usage
	if o.name == "positives" && positives != "" {
		usage = positives
	}
	what := strings.Join(o.values, " | ")
	if o.values == nil {
		what = gelo.Rules.Bounds(o.key).Want()
	}
	if usage != "" {
		usage = ", " + usage
	}
	s := fmt.Sprintf("override sampler.%s%s (%s; left out: the config's)", o.key, usage, what)
	if o.note != "" {
		s += ". " + o.note
	}
	return s
}

// addSamplerOverrides defines the set on fs but the flags named in omit (decode cuts texts with
// -max-tokens and takes no -tokens-per-text); positives says what a positive is to the command.
func addSamplerOverrides(fs *flag.FlagSet, positives string, omit ...string) {
	for i := range samplerOverrides {
		o := &samplerOverrides[i]
		if !slices.Contains(omit, o.name) {
			fs.Var(&samplerFlag{o: o}, o.name, o.help(positives))
		}
	}
}

// applySamplerFlags writes the override flags given on fs into sc; flags left out change nothing.
func applySamplerFlags(fs *flag.FlagSet, sc *gelo.Config) {
	fs.Visit(func(f *flag.Flag) {
		if v, ok := f.Value.(*samplerFlag); ok {
			v.o.set(sc, v.num, v.str)
		}
	})
}

// samplerOf is sc with the override flags given on fs applied, then validated: what every command
// that takes the set runs its sampler with. A test's probe in ctx hears the result.
func samplerOf(ctx context.Context, fs *flag.FlagSet, sc gelo.Config) (gelo.Config, error) {
	applySamplerFlags(fs, &sc)
	if err := sc.Validate(); err != nil {
		return sc, fmt.Errorf("sampler settings (config plus flags): %w", err)
	}
	if p, ok := ctx.Value(samplerProbeKey{}).(samplerProbe); ok {
		if err := p(sc); err != nil {
			return sc, err
		}
	}
	return sc, nil
}

// samplerProbe hears the sampler settings a command resolved, and may stop the command by
// returning an error: how a test sees what the overrides did without running the work.
type samplerProbe func(gelo.Config) error

// samplerProbeKey is the context key of a samplerProbe.
type samplerProbeKey struct{}

// withSamplerProbe returns ctx carrying p.
func withSamplerProbe(ctx context.Context, p samplerProbe) context.Context {
	return context.WithValue(ctx, samplerProbeKey{}, p)
}

// givenOverrides are the override flags given on a command line, by flag name, with their values.
type givenOverrides map[string]string

// String is "-kappa 3, -obs-rows 0.5", sorted by name.
func (g givenOverrides) String() string {
	var s []string
	for _, name := range slices.Sorted(maps.Keys(g)) {
		s = append(s, "-"+name+" "+g[name])
	}
	return strings.Join(s, ", ")
}

// givenSamplerFlags are the override flags given on fs.
func givenSamplerFlags(fs *flag.FlagSet) givenOverrides {
	g := givenOverrides{}
	fs.Visit(func(f *flag.Flag) {
		if _, ok := f.Value.(*samplerFlag); ok {
			g[f.Name] = f.Value.String()
		}
	})
	return g
}
