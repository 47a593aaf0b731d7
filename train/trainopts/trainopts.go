// Package trainopts is the schema of the trainer: the train section of a run config (optimizer,
// schedule, logging, evaluation and checkpoint cadence), its defaults and its range checks, free
// of the engine so that reading a config links no device code. Package train runs the loop and
// re-exports everything here.
package trainopts

import (
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
)

// Options is the trainer's section of a run config. Every field has a documented default in
// DefaultOptions.
type Options struct {
	// Steps is the number of optimizer steps. Default 600.
	Steps int `yaml:"steps" json:"steps"`
	// BatchSize is B, the examples (obfuscated sets) per step. Default 8.
	BatchSize int `yaml:"batch_size" json:"batch_size"`
	// LR is the peak learning rate after warmup. Default 1e-3.
	LR float64 `yaml:"lr" json:"lr"`
	// MinLRFrac is the cosine floor as a fraction of LR. Default 0.1.
	MinLRFrac float64 `yaml:"min_lr_frac" json:"min_lr_frac"`
	// WarmupSteps is the length of the linear warmup. Default 50.
	WarmupSteps int `yaml:"warmup_steps" json:"warmup_steps"`
	// WeightDecay is AdamW's decoupled decay on weight matrices. Default 0.01.
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"`
	// Beta1 and Beta2 are AdamW's moment decay rates. Defaults 0.9 and 0.95.
	Beta1 float64 `yaml:"beta1" json:"beta1"`
	Beta2 float64 `yaml:"beta2" json:"beta2"`
	// GradClip is the global gradient-norm clip; 0 disables it. Default 1.
	GradClip float64 `yaml:"grad_clip" json:"grad_clip"`
	// LogEvery is the interval of loss lines in metrics.jsonl and the log. Default 10.
	LogEvery int `yaml:"log_every" json:"log_every"`
	// EvalEvery is the interval of evaluations on train and val; the last step is always evaluated.
	// Default 100.
	EvalEvery int `yaml:"eval_every" json:"eval_every"`
	// EvalBatches is the number of batches per split in each evaluation. Default 8.
	EvalBatches int `yaml:"eval_batches" json:"eval_batches"`
	// CkptEvery is the checkpoint interval; the last step and an interrupt always checkpoint.
	// Default 100.
	CkptEvery int `yaml:"ckpt_every" json:"ckpt_every"`
	// KeepCkpts is how many checkpoints to keep (the latest is never removed). Default 3.
	KeepCkpts int `yaml:"keep_ckpts" json:"keep_ckpts"`
	// Workers is the number of example-generating goroutines. Default 1.
	Workers int `yaml:"workers" json:"workers"`
	// Prefetch is the number of batches generated ahead of the step. Default 4.
	Prefetch int `yaml:"prefetch" json:"prefetch"`
	// SetBucket pads each batch's set size N (rows of U, before the CLS row) up to a multiple of
	// it, in training and evaluation, so that ranged settings give a few repeated shapes and
	// memory stops growing once each has been seen. 0 (the default) chooses: 32 when the
	// sampler's set size is ranged (positives, tokens_per_text or shield_frac), else 1, which pads
	// only to the batch's largest example.
	SetBucket int `yaml:"set_bucket" json:"set_bucket"`
	// MixOn is where each batch's observations U = A X are formed: host (the sampler's workers,
	// with the host's BLAS), device (the model's backend, from the padded rows X and the mixing
	// rows A uploaded each step; engine.Tape.MixRows, fp32 in every precision) or auto: device on
	// a GPU, host on the CPU. Default auto, so CPU results are those of host mixing. The two
	// differ only in the summation order of U's sums (within fptol), so a run may resume with
	// another; evaluation during training follows it.
	MixOn string `yaml:"mix_on" json:"mix_on"`
}

// Where a batch's U = A X is formed (Options.MixOn).
const (
	MixAuto   = "auto"
	MixHost   = "host"
	MixDevice = "device"
)

// MixOnHelp lists the values of mix_on, for errors and flag help.
const MixOnHelp = "auto (device on a GPU, host on the CPU), host or device"

// MixOnDevice resolves MixOn for a run whose model computes in host memory (the CPU backend)
// when hostMemory is true: whether the model's backend forms U. "" (a config written before the
// key existed) is auto.
func (o Options) MixOnDevice(hostMemory bool) bool {
	switch o.MixOn {
	case MixDevice:
		return true
	case MixHost:
		return false
	}
	return !hostMemory
}

// Bucket is the set-size bucket a run with sampler config sc uses: SetBucket, or its default.
func (o Options) Bucket(sc gelo.Config) int {
	if o.SetBucket > 0 {
		return o.SetBucket
	}
	return sc.DefaultSetBucket()
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Steps: 600, BatchSize: 8, LR: 1e-3, MinLRFrac: 0.1, WarmupSteps: 50, WeightDecay: 0.01,
		Beta1: 0.9, Beta2: 0.95, GradClip: 1, LogEvery: 10, EvalEvery: 100, EvalBatches: 8,
		CkptEvery: 100, KeepCkpts: 3, Workers: 1, Prefetch: 4, MixOn: MixAuto,
	}
}

// Rules is every numeric field of Options with its bounds and what 0 means: Validate checks them,
// and the flags overriding a field (train -steps, -workers, ...) take their range from here. The
// maxima are far above any real run; they keep a value from reaching an allocation that panics.
var Rules = field.Table[Options]{
	{Key: "steps", Bounds: field.Bounds{Int: true, Min: 1, Max: 1e9}, Get: func(o Options) float64 { return float64(o.Steps) }},
	{Key: "batch_size", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16}, Get: func(o Options) float64 { return float64(o.BatchSize) }},
	{Key: "lr", Bounds: field.Bounds{Min: 1e-12, Max: 1}, Get: func(o Options) float64 { return o.LR }},
	{Key: "min_lr_frac", Bounds: field.Bounds{Min: 0, Max: 1}, Get: func(o Options) float64 { return o.MinLRFrac }},
	{Key: "warmup_steps", Bounds: field.Bounds{Int: true, Min: 0, Max: 1e9}, Get: func(o Options) float64 { return float64(o.WarmupSteps) }},
	{Key: "weight_decay", Bounds: field.Bounds{Min: 0, Max: 1}, Get: func(o Options) float64 { return o.WeightDecay }},
	{Key: "beta1", Bounds: field.Bounds{Min: 0, Max: 1, MaxOpen: true}, Get: func(o Options) float64 { return o.Beta1 }},
	{Key: "beta2", Bounds: field.Bounds{Min: 0, Max: 1, MaxOpen: true}, Get: func(o Options) float64 { return o.Beta2 }},
	{Key: "grad_clip", Bounds: field.Bounds{Min: 1e-6, Max: 1e9, Zero: "no clipping"}, Get: func(o Options) float64 { return o.GradClip }},
	{Key: "log_every", Bounds: field.Bounds{Int: true, Min: 1, Max: 1e9}, Get: func(o Options) float64 { return float64(o.LogEvery) }},
	{Key: "eval_every", Bounds: field.Bounds{Int: true, Min: 1, Max: 1e9}, Get: func(o Options) float64 { return float64(o.EvalEvery) }},
	{Key: "eval_batches", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20}, Get: func(o Options) float64 { return float64(o.EvalBatches) }},
	{Key: "ckpt_every", Bounds: field.Bounds{Int: true, Min: 1, Max: 1e9}, Get: func(o Options) float64 { return float64(o.CkptEvery) }},
	{Key: "keep_ckpts", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20}, Get: func(o Options) float64 { return float64(o.KeepCkpts) }},
	{Key: "workers", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 10}, Get: func(o Options) float64 { return float64(o.Workers) }},
	{Key: "prefetch", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 12}, Get: func(o Options) float64 { return float64(o.Prefetch) }},
	{Key: "set_bucket", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 12, Zero: "32 when the set size is ranged, else 1"}, Get: func(o Options) float64 { return float64(o.SetBucket) }},
}

// Validate names the first field out of range (an *field.Error with the key) and the range
// allowed, or a mix_on that is none of MixOnHelp ("" is accepted as auto: a config recorded
// before the key existed).
func (o Options) Validate() error {
	if err := Rules.Check(o); err != nil {
		return err
	}
	switch o.MixOn {
	case "", MixAuto, MixHost, MixDevice:
		return nil
	}
	return field.Errorf("mix_on", "%q, want %s", o.MixOn, MixOnHelp)
}
