package settransformer

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

func TestPresetsValidate(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	if _, err := Preset("huge"); err == nil {
		t.Error("unknown preset accepted")
	}
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	base := testConfig()
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Heads = 3 }, "heads: 3 does not divide hidden = 16"},
		{func(c *Config) { c.Hidden = 0 }, "hidden: 0"},
		{func(c *Config) { c.InputDim = -1 }, "input_dim: -1"},
		{func(c *Config) { c.Layers = 0 }, "layers: 0"},
		{func(c *Config) { c.MLPHidden = 0 }, "mlp_hidden: 0"},
		{func(c *Config) { c.Eps = 0 }, "eps: 0"},
		{func(c *Config) { c.Eps = 1e-40 }, "eps: 1e-40, want a value in [1e-30, 1]"},
		{func(c *Config) { c.Eps = 2 }, "eps: 2"},
		{func(c *Config) { c.Temperature = -1 }, "temperature: -1"},
		{func(c *Config) { c.CandidateDim = 0 }, "candidate_dim: 0"},
		{func(c *Config) { c.Task = "classify" }, `task: "classify"`},
		{func(c *Config) { c.Task = TaskUnmix; c.Slots = 4 }, "dec_layers: 0"},
		{func(c *Config) { c.Task = TaskUnmix; c.DecLayers = 2 }, "slots: 0"},
	}
	for _, tc := range cases {
		c := base
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Errorf("test config: %v", err)
	}
}

func TestConfigRoundTrips(t *testing.T) {
	c, _ := Preset("small")
	c.LearnTemperature = true
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"input_dim":4096`, `"mlp_hidden":1024`, `"learn_temperature":true`, `"dec_layers":0`} {
		if !strings.Contains(string(j), key) {
			t.Errorf("JSON %s lacks %s", j, key)
		}
	}
	var back Config
	if err := json.Unmarshal(j, &back); err != nil || back != c {
		t.Errorf("JSON round trip: %+v, %v; want %+v", back, err, c)
	}
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var backY Config
	if err := yaml.UnmarshalWithOptions(y, &backY, yaml.Strict()); err != nil || backY != c {
		t.Errorf("yaml round trip: %+v, %v; want %+v", backY, err, c)
	}
}

func TestParamNamesAndShapes(t *testing.T) {
	c := testConfig()
	specs, err := ParamSpecs(c)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(specs))
	for i, s := range specs {
		got[i] = fmt.Sprint(s.Name, s.Shape)
	}
	want := []string{"in_proj.weight[16 12]", "cls[16]"}
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		want = append(want, p+"attn_norm.weight[16]",
			p+"attn.q_proj.weight[16 16]", p+"attn.k_proj.weight[16 16]",
			p+"attn.v_proj.weight[16 16]", p+"attn.o_proj.weight[16 16]",
			p+"mlp_norm.weight[16]",
			p+"mlp.gate_proj.weight[24 16]", p+"mlp.up_proj.weight[24 16]", p+"mlp.down_proj.weight[16 24]")
	}
	want = append(want, "norm.weight[16]", "retrieval_head.weight[8 16]")
	if !slices.Equal(got, want) {
		t.Errorf("parameters:\n got %v\nwant %v", got, want)
	}
	c.LearnTemperature = true
	specs, _ = ParamSpecs(c)
	if last := specs[len(specs)-1]; last.Name != "log_tau" || last.Size() != 1 {
		t.Errorf("learned temperature: last parameter %s %v, want log_tau [1]", last.Name, last.Shape)
	}
}

func TestPaperParamCount(t *testing.T) {
	c, _ := Preset("paper")
	n, err := NumParams(c)
	if err != nil {
		t.Fatal(err)
	}
	// in_proj 384*4096 + cls 384 + 24 * (2*384 + 4*384^2 + 3*384*1536) + norm 384 + head 4096*384.
	const want = 384*4096 + 384 + 24*(2*384+4*384*384+3*384*1536) + 384 + 4096*384
	t.Logf("paper model: %d parameters (%.2fM)", n, float64(n)/1e6)
	if n != want || n < 55e6 || n > 65e6 {
		t.Errorf("paper parameter count %d, want %d (about 60M)", n, want)
	}
}

func TestInitDeterministicAndScaled(t *testing.T) {
	c, _ := Preset("tiny")
	specs, _ := ParamSpecs(c)
	byName := map[string]ParamSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	draw := func(name string, seed uint64) []float32 {
		s := byName[name]
		v := make([]float32, s.Size())
		if err := s.Init(v, seed); err != nil {
			t.Fatal(err)
		}
		return v
	}
	std := func(v []float32) float64 {
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		return math.Sqrt(ss / float64(len(v)))
	}
	a, b := draw("layers.0.attn.q_proj.weight", 1), draw("layers.0.attn.q_proj.weight", 1)
	if !slices.Equal(a, b) {
		t.Error("same seed gave different weights")
	}
	if slices.Equal(a, draw("layers.0.attn.q_proj.weight", 2)) {
		t.Error("different seeds gave the same weights")
	}
	if slices.Equal(a, draw("layers.0.attn.k_proj.weight", 1)) {
		t.Error("two parameters share their initial values")
	}
	if s := std(a); s < 0.018 || s > 0.022 {
		t.Errorf("q_proj std %.4f, want 0.02", s)
	}
	if s, want := std(draw("layers.1.mlp.down_proj.weight", 1)), 0.02/2; s < 0.9*want || s > 1.1*want {
		t.Errorf("down_proj std %.4f, want 0.02/sqrt(2L) = %.4f", s, want)
	}
	for _, x := range draw("norm.weight", 1) {
		if x != 1 {
			t.Fatalf("norm weight %v, want 1", x)
		}
	}
	if err := byName["cls"].Init(make([]float32, 3), 1); err == nil {
		t.Error("Init accepted a buffer of the wrong size")
	}
}
