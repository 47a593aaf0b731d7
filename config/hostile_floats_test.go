package config

import (
	"fmt"
	"strings"
	"testing"
)

// Every float field of a run config, set to NaN, ±Inf, ±1e300 or 1e-300, is refused by Parse naming
// the field and the file, unless the value is within the field's rule (1e-300 is, where the rule
// starts at 0): no such value may pass validation and then fail (or hang) at the first step
// (issue 24, classes 5 and 8).
func TestEveryFloatFieldRefusesHostileValues(t *testing.T) {
	// Fields that matter only under another setting get it, so that their rule applies.
	with := map[string]string{
		"sampler.mix_cond":     "sampler:\n  mix: non_orthogonal\n",
		"sampler.student_t_df": "sampler:\n  shield_kind: student_t\n",
	}
	cases := 0
	for _, r := range Rules() {
		if r.Int {
			continue
		}
		for _, v := range []struct {
			yaml string
			x    float64 // 0: not a finite number
		}{{".nan", 0}, {".inf", 0}, {"-.inf", 0}, {"1.0e+300", 1e300}, {"-1.0e+300", -1e300}, {"1.0e-300", 1e-300}} {
			cases++
			src := nested(r.Path, v.yaml)
			if extra, ok := with[r.Path]; ok {
				src = strings.Replace(src, "sampler:\n", extra, 1)
			}
			_, err := Parse("h.yaml", []byte(src))
			allowed := v.x != 0 && r.Allows(v.x)
			switch {
			case allowed && err != nil:
				t.Errorf("%s = %s is within its rule (%s) but refused: %v", r.Path, v.yaml, r.Want(), err)
			case !allowed && err == nil:
				t.Errorf("%s = %s accepted; its rule is %s", r.Path, v.yaml, r.Want())
			case !allowed && !strings.Contains(err.Error(), r.Path):
				t.Errorf("%s = %s: error does not name the key: %v", r.Path, v.yaml, err)
			case !allowed && !strings.Contains(err.Error(), "h.yaml:"):
				t.Errorf("%s = %s: error does not locate the file: %v", r.Path, v.yaml, err)
			}
		}
	}
	if cases < 100 {
		t.Fatalf("only %d cases: the float fields were not all found", cases)
	}
}

// nested writes a YAML document setting the dotted path to value.
func nested(path, value string) string {
	var b strings.Builder
	keys := strings.Split(path, ".")
	for i, k := range keys {
		fmt.Fprintf(&b, "%s%s:", strings.Repeat("  ", i), k)
		if i == len(keys)-1 {
			fmt.Fprintf(&b, " %s\n", value)
		} else {
			b.WriteString("\n")
		}
	}
	return b.String()
}
