package config

import (
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/synth/synthcfg"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/losses/ot/otcfg"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
	"github.com/gelo-research/geloattack/models/settransformer/modelcfg"
	"github.com/gelo-research/geloattack/train/trainopts"
)

// runRules are the numeric fields of the sections this package owns (loss and eval); every other
// section's fields are in the table of the package that owns its schema.
var runRules = field.Table[Run]{
	{Key: "loss.extra_negatives", Bounds: field.Bounds{Int: true, Min: 0, Max: 1 << 20}, Get: func(r Run) float64 { return float64(r.Loss.ExtraNegatives) }},
	{Key: "eval.batches", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20}, Get: func(r Run) float64 { return float64(r.Eval.Batches) }},
	{Key: "eval.pool_k", Bounds: field.Bounds{Int: true, Min: 2, Max: 1 << 20}, Get: func(r Run) float64 { return float64(r.Eval.PoolK) }},
	// The same-embedding softmax divides by tau in float32, like the model's temperature.
	{Key: "eval.tau", Bounds: field.Bounds{Min: 1e-4, Max: 1e4}, Get: func(r Run) float64 { return r.Eval.Tau }},
}

// Rule is the rule of one numeric field of a run config.
type Rule struct {
	// Path is the field's dotted YAML path ("train.steps").
	Path string
	field.Bounds
}

// Rules lists every numeric field of a run config (seeds aside: every value is a seed) with its
// bounds, gathered from the tables of the schemas that own them: the one place each rule lives.
func Rules() []Rule {
	var out []Rule
	add := func(prefix string, ns []field.Named) {
		for _, n := range ns {
			out = append(out, Rule{Path: prefix + n.Key, Bounds: n.Bounds})
		}
	}
	add("store.synth.", synthcfg.Rules.Named())
	add("sampler.", gelo.Rules.Named())
	add("model.", modelcfg.Rules.Named())
	add("train.", trainopts.Rules.Named())
	add("loss.unmix.", otcfg.Rules.Named())
	add("", runRules.Named())
	add("lm.", lmcfg.Rules.Named())
	add("lm.model.", lmcfg.ModelRules.Named())
	return out
}

// Bounds returns the rule of the numeric field at a dotted path; a path with no rule is a
// programming error.
func Bounds(path string) field.Bounds {
	for _, r := range Rules() {
		if r.Path == path {
			return r.Bounds
		}
	}
	panic("config: no rule for " + path)
}
