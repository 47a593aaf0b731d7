package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
)

// A sampler override given is applied whatever its value (no value means "keep"), one left out
// keeps the config's, and values the sampler cannot take are refused at parse time naming what to
// give instead.
func TestSamplerOverridesGivenIsApplied(t *testing.T) {
	parse := func(args ...string) (*gelo.Config, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := addSamplerOverrides(fs, "texts", true)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		sc := gelo.DefaultConfig()
		o.apply(&sc)
		return &sc, nil
	}
	def := gelo.DefaultConfig()
	sc, err := parse()
	if err != nil || sc.ShieldFrac != def.ShieldFrac || sc.ShieldScale != def.ShieldScale || sc.ObsRows != def.ObsRows || sc.Mix != def.Mix {
		t.Fatalf("no flags changed the config: %+v, %v", sc, err)
	}
	sc, err = parse("-shield-frac", "0", "-obs-rows", "0.5", "-kappa", "1", "-shield-scale", "3")
	if err != nil || sc.ShieldFrac != gelo.Fixed(0) || sc.ObsRows != 0.5 || sc.Mix != gelo.MixNonOrthogonal || sc.MixCond != gelo.Fixed(1) || sc.ShieldScale != gelo.Fixed(3) {
		t.Fatalf("given flags not applied: %+v, %v", sc, err)
	}
	for _, c := range []struct{ args, want string }{
		{"-shield-scale 0", "-shield-frac 0"},
		{"-kappa 0", "cond(A) >= 1"},
		{"-obs-rows 0", "(0, 1]"},
		{"-shield-frac -1", "[0, 1]"},
		{"-observe-dtype=", "leave the flag out"},
	} {
		if _, err := parse(strings.Fields(c.args)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
