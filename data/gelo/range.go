package gelo

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/gelo-research/geloattack/internal/field"
)

// Randomization says how a Range is drawn per example.
type Randomization string

const (
	// RandNone means a fixed value: Min == Max.
	RandNone Randomization = "none"
	// RandUniform draws uniformly in [Min, Max] (integers: uniformly among Min..Max).
	RandUniform Randomization = "uniform"
	// RandLogUniform draws log-uniformly in [Min, Max], Min > 0 (integers: floor of a log-uniform
	// draw in [Min, Max+1), so Max is included).
	RandLogUniform Randomization = "log_uniform"
)

// Range is a per-example quantity: a fixed value or an interval with its own randomization. Each
// Range carries its randomization (rather than one switch for the whole config) so that, e.g., a
// log-uniform shield scale can sit next to a uniform shield fraction.
//
// In YAML and JSON a Range is written as
//
//	0.5                                     fixed (rand none)
//	[0.1, 1.0]                              uniform in [0.1, 1.0]
//	{min: 0.1, max: 1.0, rand: log_uniform} any randomization (rand defaults to uniform)
//
// The zero Rand ("") means none.
type Range struct {
	// Min is the smallest value drawn.
	Min float64 `yaml:"min" json:"min"`
	// Max is the largest value drawn (included).
	Max float64 `yaml:"max" json:"max"`
	// Rand is how values are drawn in [Min, Max].
	Rand Randomization `yaml:"rand" json:"rand"`
}

// Fixed is the Range that always gives v.
func Fixed(v float64) Range { return Range{Min: v, Max: v, Rand: RandNone} }

// Uniform is the Range drawn uniformly in [lo, hi].
func Uniform(lo, hi float64) Range { return Range{Min: lo, Max: hi, Rand: RandUniform} }

// LogUniform is the Range drawn log-uniformly in [lo, hi].
func LogUniform(lo, hi float64) Range { return Range{Min: lo, Max: hi, Rand: RandLogUniform} }

func (r Range) rand() Randomization {
	if r.Rand == "" {
		return RandNone
	}
	return r.Rand
}

// validate checks r's form for the field named key (its YAML key): finite bounds, min <= max and a
// known randomization. The values allowed are the field's rule in Rules.
func (r Range) validate(key string) error {
	if math.IsNaN(r.Min) || math.IsNaN(r.Max) || math.IsInf(r.Min, 0) || math.IsInf(r.Max, 0) {
		return field.Errorf(key, "%s has a non-finite bound", r)
	}
	if r.Min > r.Max {
		return field.Errorf(key, "%s has min > max", r)
	}
	switch r.rand() {
	case RandNone:
		if r.Min != r.Max {
			return field.Errorf(key, "%s: rand none requires min == max", r)
		}
	case RandUniform:
	case RandLogUniform:
		if !(r.Min > 0) {
			return field.Errorf(key, "%s: rand log_uniform requires min > 0", r)
		}
	default:
		return field.Errorf(key, "rand %q, want none, uniform or log_uniform", r.Rand)
	}
	return nil
}

// String writes r as it would appear in YAML.
func (r Range) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch r.rand() {
	case RandNone:
		if r.Min == r.Max {
			return f(r.Min)
		}
	case RandUniform:
		return "[" + f(r.Min) + ", " + f(r.Max) + "]"
	}
	return fmt.Sprintf("{min: %s, max: %s, rand: %s}", f(r.Min), f(r.Max), r.Rand)
}

// draw returns one real value of a validated Range.
func (r Range) draw(rng *rand.Rand) float64 {
	switch r.rand() {
	case RandUniform:
		return r.Min + (r.Max-r.Min)*rng.Float64()
	case RandLogUniform:
		return math.Exp(math.Log(r.Min) + (math.Log(r.Max)-math.Log(r.Min))*rng.Float64())
	}
	return r.Min
}

// drawInt returns one integer of a validated integer Range, Min and Max included.
func (r Range) drawInt(rng *rand.Rand) int {
	lo, hi := int(r.Min), int(r.Max)
	switch r.rand() {
	case RandUniform:
		return lo + rng.IntN(hi-lo+1)
	case RandLogUniform:
		v := int(math.Exp(math.Log(float64(lo)) + (math.Log(float64(hi+1))-math.Log(float64(lo)))*rng.Float64()))
		return min(max(v, lo), hi) // round-off guard at both ends
	}
	return lo
}

// fromAny fills r from a decoded scalar, two-element list or mapping.
func (r *Range) fromAny(v any) error {
	num := func(x any) (float64, error) {
		switch x := x.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case uint64:
			return float64(x), nil
		case json.Number:
			return x.Float64()
		case string:
			// The YAML parser reads an exponent without a decimal point (1e1) as a string, which a
			// float field such as train.lr accepts: a range bound must read the same way.
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				return f, nil
			}
		}
		return 0, fmt.Errorf("range bound %v (%T) is not a number", x, x)
	}
	switch v := v.(type) {
	case []any:
		if len(v) != 2 {
			return fmt.Errorf("range list has %d elements, want [min, max]", len(v))
		}
		lo, err := num(v[0])
		if err != nil {
			return err
		}
		hi, err := num(v[1])
		if err != nil {
			return err
		}
		*r = Uniform(lo, hi)
		return nil
	case map[string]any:
		out := Range{Rand: RandUniform}
		seen := 0
		for k, x := range v {
			var err error
			switch k {
			case "min":
				out.Min, err = num(x)
				seen++
			case "max":
				out.Max, err = num(x)
				seen++
			case "rand":
				s, ok := x.(string)
				if !ok {
					return fmt.Errorf("range rand %v is not a string", x)
				}
				out.Rand = Randomization(s)
			default:
				return fmt.Errorf("range has unknown key %q (want min, max, rand)", k)
			}
			if err != nil {
				return err
			}
		}
		if seen != 2 {
			return fmt.Errorf("range mapping needs both min and max")
		}
		*r = out
		return nil
	case nil:
		return fmt.Errorf("range is empty")
	}
	x, err := num(v)
	if err != nil {
		return err
	}
	*r = Fixed(x)
	return nil
}

// toAny is the shortest form of r: a number, a [min, max] list or a mapping.
func (r Range) toAny() any {
	switch r.rand() {
	case RandNone:
		if r.Min == r.Max {
			return r.Min
		}
	case RandUniform:
		return []float64{r.Min, r.Max}
	}
	return map[string]any{"min": r.Min, "max": r.Max, "rand": string(r.Rand)}
}

// UnmarshalJSON accepts 0.5, [0.1, 1.0] or {"min": 0.1, "max": 1.0, "rand": "log_uniform"}.
func (r *Range) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return r.fromAny(v)
}

// MarshalJSON writes the shortest form that reads back to the same Range.
func (r Range) MarshalJSON() ([]byte, error) { return json.Marshal(r.toAny()) }

// UnmarshalYAML accepts the same three forms as UnmarshalJSON (go-yaml's interface unmarshaler).
func (r *Range) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	return r.fromAny(v)
}

// MarshalYAML writes the shortest form that reads back to the same Range.
func (r Range) MarshalYAML() (any, error) { return r.toAny(), nil }
