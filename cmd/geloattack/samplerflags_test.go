package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
)

// overrideCase is a flag of the set, a value, and what it does to the sampler settings.
type overrideCase struct {
	flag, value string
	want        func(sc *gelo.Config)
}

// overrideCases is, per flag of the sampler-override set, a value the configs of these tests
// accept and what it must do to the sampler settings, written out here rather than read from
// the set.
var overrideCases = []overrideCase{
	{"positives", "3", func(sc *gelo.Config) { sc.Positives = gelo.Fixed(3) }},
	{"tokens-per-text", "5", func(sc *gelo.Config) { sc.TokensPerText = gelo.Fixed(5) }},
	{"shield-kind", "manifold", func(sc *gelo.Config) { sc.ShieldKind = gelo.ShieldManifold }},
	{"shield-rows", "7", func(sc *gelo.Config) { sc.ShieldRows = 7 }},
	{"shield-frac", "0.5", func(sc *gelo.Config) { sc.ShieldFrac = gelo.Fixed(0.5) }},
	{"shield-scale", "3", func(sc *gelo.Config) { sc.ShieldScale = gelo.Fixed(3) }},
	{"kappa", "10", func(sc *gelo.Config) { sc.Mix, sc.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(10) }},
	{"obs-rows", "0.5", func(sc *gelo.Config) { sc.ObsRows = 0.5 }},
	{"observe-dtype", "bf16", func(sc *gelo.Config) { sc.ObserveDtype = gelo.ObserveBF16 }},
}

// errProbed stops a command once the probe has heard its sampler settings.
var errProbed = errors.New("probed")

// probeSampler runs the command line args (below geloattack) until it has resolved its sampler
// settings, and returns them; the command's error when it stops before.
func probeSampler(t *testing.T, args []string) (gelo.Config, error) {
	t.Helper()
	var got gelo.Config
	ctx := withSamplerProbe(context.Background(), func(sc gelo.Config) error { got = sc; return errProbed })
	err := root.run(ctx, root.Name, args, io.Discard)
	if errors.Is(err, errProbed) {
		return got, nil
	}
	if err == nil {
		err = errors.New("the command ran to its end without resolving a sampler")
	}
	return got, err
}

// Every command that takes the sampler-override set applies exactly the overrides given: none
// given leaves the config's sampler as it is, each given alone changes its field and nothing
// else, all given change all; a value outside the field's rule is refused while the flags are
// parsed, in field.Bounds wording, and a string field names the values it takes. The commands
// run in this process up to the point where their sampler is resolved (a probe stops them there).
func TestEveryCommandAppliesExactlyTheGivenOverrides(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "5")
	run := filepath.Join(dir, "run")
	if out, err := cli(t, "train", "-config", cfgPath, "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	quick, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range samplerOverrides {
		if !slices.ContainsFunc(overrideCases, func(c overrideCase) bool { return c.flag == o.name }) {
			t.Errorf("-%s has no case in overrideCases: say what it must do", o.name)
		}
	}
	commands := []struct {
		args []string
		base gelo.Config // the sampler the command's config gives
		omit string      // the override the command does not take
	}{
		{[]string{"train"}, quick.Sampler, ""},
		{[]string{"train", "-config", cfgPath}, tiny.Sampler, ""},
		{[]string{"eval", run}, tiny.Sampler, ""},
		{[]string{"baseline", "-attack", "rowspace"}, quick.Sampler, ""},
		{[]string{"baseline", "-attack", "jd", "-config", cfgPath}, tiny.Sampler, ""},
		{[]string{"recover", "-store", "x"}, quick.Sampler, ""},
		{[]string{"baseline", "-attack", "content", "-store", "x"}, quick.Sampler, ""},
		{[]string{"decode", "-model", "x"}, quick.Sampler, "tokens-per-text"},
		{[]string{"baseline", "-attack", "decode", "-model", "x", "-config", cfgPath}, tiny.Sampler, "tokens-per-text"},
	}
	for _, c := range commands {
		name := strings.Join(c.args, " ")
		got, err := probeSampler(t, c.args)
		if err != nil || got != c.base {
			t.Errorf("%s with no override: %+v, %v; want the config's sampler %+v", name, got, err, c.base)
			continue
		}
		all := append([]string(nil), c.args...)
		wantAll := c.base
		for _, o := range overrideCases {
			args := append(append([]string(nil), c.args...), "-"+o.flag, o.value)
			got, err := probeSampler(t, args)
			if o.flag == c.omit {
				if err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -"+o.flag) {
					t.Errorf("%s -%s: %v, want the flag refused as not defined", name, o.flag, err)
				}
				continue
			}
			want := c.base
			o.want(&want)
			if err != nil || got != want {
				t.Errorf("%s -%s %s:\n got  %+v, %v\n want %+v", name, o.flag, o.value, got, err, want)
			}
			all = append(all, "-"+o.flag, o.value)
			o.want(&wantAll)
		}
		if got, err := probeSampler(t, all); err != nil || got != wantAll {
			t.Errorf("%s with every override:\n got  %+v, %v\n want %+v", name, got, err, wantAll)
		}
		for _, o := range samplerOverrides {
			if o.name == c.omit {
				continue
			}
			bad, want := []string{"bogus"}, "want "+strings.Join(o.values, " | ")
			if o.values == nil {
				b := gelo.Rules.Bounds(o.key)
				bad, want = []string{"-1", field.Num(2 * b.Max), "NaN"}, "want "+b.Want()
			}
			for _, v := range bad {
				_, err := probeSampler(t, append(append([]string(nil), c.args...), "-"+o.name, v))
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "-"+o.name) {
					t.Errorf("%s -%s %s: %v, want a refusal naming the flag and %q", name, o.name, v, err, want)
				}
			}
		}
	}
}

// eval under an override says so: eval.json records the flags given with their values, eval.md
// and stderr name them; without one, eval.json has no such key.
func TestEvalRecordsItsSamplerOverrides(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if out, err := cli(t, "train", "-config", writeConfig(t, dir, "5"), "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want map[string]string
	}{
		{nil, nil},
		{[]string{"-obs-rows", "0.5", "-kappa", "3"}, map[string]string{"obs-rows": "0.5", "kappa": "3"}},
	} {
		out := filepath.Join(dir, fmt.Sprint("e", len(c.args)))
		args := append(append([]string{"eval", "-batches", "1", "-out", out}, c.args...), run)
		stderr, err := cli(t, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var rec struct {
			Overrides map[string]string `json:"sampler_overrides"`
		}
		if err := json.Unmarshal(mustRead(t, filepath.Join(out, "eval.json")), &rec); err != nil {
			t.Fatal(err)
		}
		md := string(mustRead(t, filepath.Join(out, "eval.md")))
		named := strings.Contains(md, "-kappa 3, -obs-rows 0.5") && strings.Contains(string(stderr), "-kappa 3, -obs-rows 0.5")
		if !maps.Equal(rec.Overrides, c.want) || named != (c.want != nil) {
			t.Errorf("%v: eval.json records %v, want %v; eval.md and stderr name them: %v\n%s\n%s", c.args, rec.Overrides, c.want, named, md, stderr)
		}
	}
}

// A string override given empty is refused (no value means "keep": leave the flag out), and a
// refusal of -shield-scale says how to ask for no shields.
func TestSamplerOverrideRefusalsSayWhatToGive(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addSamplerOverrides(fs, "texts")
	for _, c := range []struct{ args, want string }{
		{"-observe-dtype=", "leave the flag out"},
		{"-shield-kind=", "leave the flag out"},
		{"-shield-scale 0", "for none give -shield-frac 0"},
		{"-positives 2.5", "want an integer in [1, 65536]"},
		{"-obs-rows x", "not a number"},
	} {
		if err := fs.Parse(strings.Fields(c.args)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
