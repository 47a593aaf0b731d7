package hf

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// config.json numbers. transformers reads config.json with Python's json module, where 8 is an
// int and 8.0 a float, and checks some types: rope_scaling's factor, low_freq_factor and
// high_freq_factor must be floats (it warns on every load otherwise). So a config keeps the kind
// of every number: Go ints and json.Number values (a config read from a file keeps its numbers as
// written, see unmarshalConfig) are written as they are, float64 and float32 values as Python
// writes floats (8.0, 1e-05, 500000.0).

// marshalConfig is config as indented JSON, its floats written as Python writes them.
func marshalConfig(config map[string]any) ([]byte, error) {
	return json.MarshalIndent(pythonFloats(config), "", "  ")
}

// unmarshalConfig reads a config.json object keeping every number as written (json.Number), so
// that writing it back keeps ints ints and floats floats.
func unmarshalConfig(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var c map[string]any
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	return c, nil
}

// configFloat is the value of a config number: a float64, or a json.Number (ok is false for
// anything else).
func configFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// pythonFloats returns v with every float64 and float32 in it (in maps and slices) replaced by
// the json.Number Python would write for it.
func pythonFloats(v any) any {
	switch v := v.(type) {
	case float64:
		return json.Number(pythonFloat(v, 64))
	case float32:
		return json.Number(pythonFloat(float64(v), 32))
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = pythonFloats(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = pythonFloats(x)
		}
		return out
	}
	return v
}

// pythonFloat formats f as Python's repr (which its json module writes): the shortest decimal
// that reads back as f, positional with at least one fractional digit ("8.0") when its decimal
// exponent is in [-4, 16), else in exponent form ("1e-05", "1e+16"). bits is 64, or 32 for a
// float32 value. NaN and infinities come back as Go writes them, which json.Marshal refuses.
func pythonFloat(f float64, bits int) string {
	e := strconv.FormatFloat(f, 'e', -1, bits) // d.ddde±XX
	i := strings.LastIndexByte(e, 'e')
	if i < 0 {
		return e // NaN, ±Inf
	}
	exp, err := strconv.Atoi(e[i+1:])
	if err != nil || exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
