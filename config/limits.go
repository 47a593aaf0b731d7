package config

import (
	"fmt"
	"reflect"
	"strings"
)

// limit is the largest value a size field may take. The limits are far above anything a 2-core
// machine or one GPU trains (the paper's model is hidden 384, 24 layers, batches of 16); they exist
// so that no value of a config reaches an allocation that panics (makeslice) or an integer product
// that overflows. Whether a config within them fits the machine is the resource pre-flight's
// question (runner.Preflight), asked before anything large is allocated.
type limit struct {
	path string
	max  float64
}

// sizeLimits lists every size field of a run config with its limit. A Range field is checked on its
// max.
var sizeLimits = []limit{
	{"store.synth.texts", 1 << 22},
	{"store.synth.min_tokens", 1 << 16},
	{"store.synth.max_tokens", 1 << 16},
	{"store.synth.vocab", 1 << 24},
	{"sampler.positives", 1 << 16},
	{"sampler.tokens_per_text", 1 << 16},
	{"sampler.shield_rows", 1 << 20},
	{"model.input_dim", 1 << 16},
	{"model.candidate_dim", 1 << 16},
	{"model.hidden", 1 << 15},
	{"model.layers", 1 << 10},
	{"model.heads", 1 << 10},
	{"model.mlp_hidden", 1 << 17},
	{"model.dec_layers", 1 << 10},
	{"model.slots", 1 << 16},
	{"train.steps", 1e9},
	{"train.batch_size", 1 << 16},
	{"train.warmup_steps", 1e9},
	{"train.log_every", 1e9},
	{"train.eval_every", 1e9},
	{"train.eval_batches", 1 << 20},
	{"train.ckpt_every", 1e9},
	{"train.keep_ckpts", 1 << 20},
	{"train.workers", 1 << 10},
	{"train.prefetch", 1 << 12},
	{"train.set_bucket", 1 << 12},
	{"loss.extra_negatives", 1 << 20},
	{"loss.unmix.iters", 1 << 20},
	{"eval.batches", 1 << 20},
	{"eval.pool_k", 1 << 20},
}

// explicitZero lists the fields whose zero the component they configure reads as "use the
// default": a 0 there can only come from the file (Default fills them), and is refused rather than
// silently replaced.
var explicitZero = []string{
	"store.synth.texts", "store.synth.min_tokens", "store.synth.max_tokens", "store.synth.d",
	"store.synth.e", "store.synth.vocab", "store.synth.norm_mean", "store.synth.zipf_s",
	"store.synth.zipf_v",
}

// limitError is a size field out of its limit, before Parse locates it in the file.
type limitError struct {
	path string
	msg  string
}

func (e *limitError) Error() string { return e.path + ": " + e.msg }

// checkLimits reports the first size field over its limit, and the first field set to a zero that
// would be read as its default.
func (r Run) checkLimits() error {
	v := reflect.ValueOf(r)
	for _, l := range sizeLimits {
		f, ok := fieldAt(v, l.path)
		if !ok {
			panic("config: size limit of unknown field " + l.path) // a programming error, caught by tests
		}
		x := numeric(f)
		if x > l.max {
			return &limitError{l.path, fmt.Sprintf("%v is over the limit %v (a value this large cannot be allocated; see the README's resource pre-flight)", fmtNum(x), fmtNum(l.max))}
		}
	}
	if r.Store.Path == "" {
		for _, p := range explicitZero {
			f, _ := fieldAt(v, p)
			if numeric(f) == 0 {
				return &limitError{p, fmt.Sprintf("0 is not allowed (remove the key to keep the default %v)", fmtNum(defaultAt(p)))}
			}
		}
	}
	return nil
}

// defaultAt is the default value of a numeric field.
func defaultAt(path string) float64 {
	f, _ := fieldAt(reflect.ValueOf(Default()), path)
	return numeric(f)
}

// fieldAt finds the field at a dotted YAML path.
func fieldAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, name := range strings.Split(path, ".") {
		f, ok := fieldByYAML(v.Type(), name)
		if !ok {
			return reflect.Value{}, false
		}
		v = v.FieldByIndex(f.Index)
	}
	return v, true
}

// numeric is a field's value as a float64 (a Range's max); NaN for non-numeric fields.
func numeric(v reflect.Value) float64 {
	if v.Type() == rangeType {
		return v.FieldByName("Max").Float()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	}
	panic("config: not a numeric field: " + v.Type().String())
}

// fmtNum writes integral values without an exponent.
func fmtNum(x float64) string {
	if x == float64(int64(x)) && x < 1e18 && x > -1e18 {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%g", x)
}
