package hf

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pythonFloat writes what Python's repr (and so its json module) writes.
func TestPythonFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{8, "8.0"}, {1, "1.0"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {-4, "-4.0"},
		{500000, "500000.0"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e17, "1.5e+17"},
		{0.02, "0.02"}, {1e-4, "0.0001"}, {1e-5, "1e-05"}, {1e-6, "1e-06"}, {2.5e-7, "2.5e-07"},
		{0.1, "0.1"}, {1.0 / 3, "0.3333333333333333"}, {123456.789, "123456.789"},
	} {
		if got := pythonFloat(c.f, 64); got != c.want {
			t.Errorf("pythonFloat(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	// float32 values are written as the shortest float32 decimal, as Go writes them.
	if got := pythonFloat(float64(float32(1e-5)), 32); got != "1e-05" {
		t.Errorf("pythonFloat(float32 1e-5) = %q", got)
	}
	if _, err := marshalConfig(map[string]any{"x": math.NaN()}); err == nil {
		t.Error("NaN written")
	}
}

// marshalConfig keeps the kind of every number: Go ints and json.Number values as they are,
// floats with a fractional part or an exponent, in nested objects and arrays too.
func TestMarshalConfigNumbers(t *testing.T) {
	js, err := marshalConfig(map[string]any{
		"hidden_size": 64, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "vocab": json.Number("100"),
		"eps_as_written": json.Number("1e-06"),
		"rope_scaling":   map[string]any{"factor": 8.0, "original_max_position_embeddings": 8192},
		"list":           []any{1.0, 2, float32(0.5)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"hidden_size": 64,`, `"rms_norm_eps": 1e-05,`, `"rope_theta": 10000.0`,
		`"vocab": 100`, `"eps_as_written": 1e-06,`, `"factor": 8.0,`, `"original_max_position_embeddings": 8192`,
		"\"list\": [\n    1.0,\n    2,\n    0.5\n  ]"} {
		if !strings.Contains(string(js), want) {
			t.Errorf("config.json lacks %s:\n%s", want, js)
		}
	}
}

// Init writes the floats of the imitated config.json as floats (transformers warns on every load
// when rope_scaling's factors are ints) and its ints as ints.
func TestInitWritesFloats(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(InitOptions{Like: "llama3-8b", Layers: 1, Hidden: 64, Vocab: 100, Seed: 1, DType: F32, Out: dir}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"factor": 8.0`, `"low_freq_factor": 1.0`, `"high_freq_factor": 4.0`,
		`"original_max_position_embeddings": 8192`, `"rope_theta": 500000.0`, `"rms_norm_eps": 1e-05`,
		`"attention_dropout": 0.0`, `"initializer_range": 0.02`, `"hidden_size": 64,`, `"num_hidden_layers": 1,`,
		`"vocab_size": 100`, `"max_position_embeddings": 131072`, `"bos_token_id": 128000`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("config.json lacks %s:\n%s", want, raw)
		}
	}
}
