package config

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Field is one leaf of a run config: its dotted YAML path and its value as YAML would write it.
type Field struct {
	// Path is the dotted YAML path, e.g. "sampler.shield_scale".
	Path string
	// Value is the value's text: ranges as gelo.Range.String writes them, other values with %v.
	Value string
}

// Fields lists every leaf of cfg in declaration order. Values with their own text form (ranges)
// are leaves, so a range is one field rather than its min, max and rand.
func Fields(cfg Run) []Field {
	var out []Field
	walk(reflect.ValueOf(cfg), "", &out)
	return out
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

func walk(v reflect.Value, prefix string, out *[]Field) {
	t := v.Type()
	if t.Kind() != reflect.Struct || t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		*out = append(*out, Field{Path: prefix, Value: leafText(v)})
		return
	}
	for i := 0; i < t.NumField(); i++ {
		n := yamlName(t.Field(i))
		if n == "" {
			continue
		}
		p := n
		if prefix != "" {
			p = prefix + "." + n
		}
		walk(v.Field(i), p, out)
	}
}

func leafText(v reflect.Value) string {
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(v.Interface())
}

// yamlName is a struct field's YAML key, or "" for unexported and skipped fields.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	n, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if n == "-" {
		return ""
	}
	return n
}

// Diff names the first field (dotted path: old -> new) where a run made with config had would
// differ from one made with want, or "" when they train the same thing. Settings that do not
// change results (train.workers, train.prefetch, device; train.mix_on, which changes only the
// summation order of U's sums, as a device does) are ignored, and model widths left at 0
// in want (filled from the store) match any. precision is compared: bf16 and fp32 GEMMs train
// different numbers, so sweep cells that differ only in it are different runs (resuming a run
// with another precision is allowed by runner.Train, which sets it aside before calling Diff).
func Diff(had, want Run) string {
	if want.Model.InputDim == 0 {
		want.Model.InputDim = had.Model.InputDim
	}
	if want.Model.CandidateDim == 0 {
		want.Model.CandidateDim = had.Model.CandidateDim
	}
	had.Train.Workers, had.Train.Prefetch, had.Device = want.Train.Workers, want.Train.Prefetch, want.Device
	had.Train.MixOn = want.Train.MixOn
	a, b := Fields(had), Fields(want)
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("%s: %s -> %s", a[i].Path, a[i].Value, b[i].Value)
		}
	}
	return ""
}
