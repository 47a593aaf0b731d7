package gelo

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesFieldValueAndRange(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error
	}{
		{"val_frac", func(c *Config) { c.ValFrac = 1 }, []string{"val_frac", "1", "(0, 1)"}},
		{"positives zero", func(c *Config) { c.Positives = Fixed(0) }, []string{"positives", "an integer in [1, 65536]"}},
		{"positives fraction", func(c *Config) { c.Positives = Uniform(1, 2.5) }, []string{"positives", "[1, 2.5]", "an integer"}},
		{"tokens none range", func(c *Config) { c.TokensPerText = Range{Min: 8, Max: 16, Rand: RandNone} }, []string{"tokens_per_text", "none requires min == max"}},
		{"tokens zero-rand range", func(c *Config) { c.TokensPerText = Range{Min: 8, Max: 16} }, []string{"tokens_per_text", "none requires min == max"}},
		{"shield_frac log0", func(c *Config) { c.ShieldFrac = LogUniform(0, 1) }, []string{"shield_frac", "log_uniform requires min > 0"}},
		{"shield_frac negative", func(c *Config) { c.ShieldFrac = Fixed(-0.1) }, []string{"shield_frac", "-0.1", "[0, 1]"}},
		{"shield_frac above one", func(c *Config) { c.ShieldFrac = Uniform(0.5, 1.5) }, []string{"shield_frac", "1.5", "[0, 1]"}},
		{"shield_frac min>max", func(c *Config) { c.ShieldFrac = Uniform(0.5, 0.1) }, []string{"shield_frac", "min > max"}},
		{"shield_scale zero", func(c *Config) { c.ShieldScale = Fixed(0) }, []string{"shield_scale", "[1e-06, 1000000]"}},
		{"mix_cond", func(c *Config) { c.Mix = MixNonOrthogonal; c.MixCond = Uniform(0.5, 10) }, []string{"mix_cond", "[0.5, 10]", "[1, 1000000000000]"}},
		{"mix_cond bad rand", func(c *Config) { c.Mix = MixNonOrthogonal; c.MixCond = Range{Min: 2, Max: 3, Rand: "gauss"} }, []string{"mix_cond", `"gauss"`}},
		{"student df", func(c *Config) { c.ShieldKind = ShieldStudentT; c.StudentTDF = 2 }, []string{"student_t_df", "(2, 1000000]"}},
		{"shield kind", func(c *Config) { c.ShieldKind = "laplace" }, []string{"shield_kind", "laplace"}},
		{"shield rows", func(c *Config) { c.ShieldRows = -3 }, []string{"shield_rows", "-3"}},
		{"mix", func(c *Config) { c.Mix = "unitary" }, []string{"mix", "unitary"}},
		{"obs_rows", func(c *Config) { c.ObsRows = 0 }, []string{"obs_rows", "[1e-06, 1]"}},
		{"observe_dtype", func(c *Config) { c.ObserveDtype = "fp8" }, []string{"observe_dtype", "fp8"}},
		{"token_sampling", func(c *Config) { c.TokenSampling = "strided" }, []string{"token_sampling", "strided"}},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mutate(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
	// shield_frac is not checked when shield_rows overrides it.
	c := DefaultConfig()
	c.ShieldRows, c.ShieldFrac = 5, Fixed(-1)
	if err := c.Validate(); err != nil {
		t.Fatalf("shield_rows > 0 must override shield_frac: %v", err)
	}
}

func TestRangeDecodesAllFormsAndRoundTrips(t *testing.T) {
	cases := []struct {
		yaml, json string
		want       Range
	}{
		{"0.5", "0.5", Fixed(0.5)},
		{"3", "3", Fixed(3)},
		{"[0.1, 1.0]", "[0.1, 1.0]", Uniform(0.1, 1)},
		{"{min: 0.1, max: 2, rand: log_uniform}", `{"min": 0.1, "max": 2, "rand": "log_uniform"}`, LogUniform(0.1, 2)},
		{"{min: 1, max: 2}", `{"min": 1, "max": 2}`, Uniform(1, 2)},
		{"{min: 2, max: 2, rand: none}", `{"min": 2, "max": 2, "rand": "none"}`, Fixed(2)},
	}
	for _, tc := range cases {
		var y, j Range
		if err := yaml.Unmarshal([]byte(tc.yaml), &y); err != nil || y != tc.want {
			t.Errorf("yaml %s: %+v, %v; want %+v", tc.yaml, y, err, tc.want)
		}
		if err := json.Unmarshal([]byte(tc.json), &j); err != nil || j != tc.want {
			t.Errorf("json %s: %+v, %v; want %+v", tc.json, j, err, tc.want)
		}
		b, err := json.Marshal(tc.want)
		var back Range
		if err != nil || json.Unmarshal(b, &back) != nil || back != tc.want {
			t.Errorf("json round trip of %+v: %s -> %+v (%v)", tc.want, b, back, err)
		}
		yb, err := yaml.Marshal(tc.want)
		back = Range{}
		if err != nil || yaml.Unmarshal(yb, &back) != nil || back != tc.want {
			t.Errorf("yaml round trip of %+v: %s -> %+v (%v)", tc.want, yb, back, err)
		}
	}
	for _, bad := range []string{"[1, 2, 3]", "[1]", "{min: 1}", "{min: 1, max: 2, mode: x}", `"abc"`, "[a, 2]"} {
		var r Range
		if err := yaml.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("yaml %s accepted as %+v", bad, r)
		}
	}
}

func TestConfigYAMLUsesSpecNames(t *testing.T) {
	src := `
seed: 7
val_frac: 0.2
positives: [2, 5]
tokens_per_text: 32
token_sampling: random
center: true
shield_kind: manifold
shield_frac: {min: 0.05, max: 0.5, rand: log_uniform}
shield_scale: [0.5, 2]
mix: non_orthogonal
mix_cond: 100
obs_rows: 0.75
observe_dtype: bf16
`
	c := DefaultConfig()
	if err := yaml.UnmarshalWithOptions([]byte(src), &c, yaml.DisallowUnknownField()); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Seed, want.ValFrac, want.Positives, want.TokensPerText = 7, 0.2, Uniform(2, 5), Fixed(32)
	want.TokenSampling, want.Center, want.ShieldKind = TokenRandom, true, ShieldManifold
	want.ShieldFrac, want.ShieldScale = LogUniform(0.05, 0.5), Uniform(0.5, 2)
	want.Mix, want.MixCond, want.ObsRows, want.ObserveDtype = MixNonOrthogonal, Fixed(100), 0.75, ObserveBF16
	if c != want {
		t.Fatalf("decoded\n%+v\nwant\n%+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// JSON of the resolved config reads back to the same config.
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("json round trip: %s -> %+v, %v", b, back, err)
	}
}

func TestRangeDrawsStayInsideAndIntegersIncludeBothEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range []Range{Uniform(2, 4), LogUniform(1, 3)} {
		seen := map[int]int{}
		for i := 0; i < 3000; i++ {
			seen[r.drawInt(rng)]++
		}
		for v := range seen {
			if v < int(r.Min) || v > int(r.Max) {
				t.Fatalf("%v drew %d", r, v)
			}
		}
		for v := int(r.Min); v <= int(r.Max); v++ {
			if seen[v] == 0 {
				t.Fatalf("%v never drew %d: %v", r, v, seen)
			}
		}
	}
	// Log-uniform integers: P(k) = log((k+1)/k) / log(4) on 1..3, so 1 is drawn half the time.
	r, n, ones := LogUniform(1, 3), 20000, 0
	for i := 0; i < n; i++ {
		if r.drawInt(rng) == 1 {
			ones++
		}
	}
	if f := float64(ones) / float64(n); f < 0.48 || f > 0.52 {
		t.Fatalf("log_uniform [1,3] drew 1 with frequency %.3f, want 0.5", f)
	}
	for _, r := range []Range{Uniform(0.1, 0.2), LogUniform(1e-3, 10)} {
		lo, hi := 1e9, -1e9
		for i := 0; i < 5000; i++ {
			v := r.draw(rng)
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo < r.Min || hi > r.Max {
			t.Fatalf("%v drew outside: [%v, %v]", r, lo, hi)
		}
	}
	if v := Fixed(0.3).draw(rng); v != 0.3 {
		t.Fatalf("fixed drew %v", v)
	}
}

func TestCeilCountIgnoresProductRoundOff(t *testing.T) {
	// Variables, not constants: Go folds constant expressions exactly.
	frac := 0.55
	if frac*100 == 55 {
		t.Fatal("the round-off this test is about did not happen")
	}
	for _, c := range []struct {
		x    float64
		want int
	}{{frac * 100, 55}, {0.25 * 30, 8}, {0, 0}, {1e-6, 1}, {2.5, 3}} {
		if got := ceilCount(c.x); got != c.want {
			t.Errorf("ceilCount(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}
