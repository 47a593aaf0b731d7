// Package modelcfg is the schema of the set-transformer attack model (SPEC §4): the model
// section of a run config (also stored as JSON in checkpoint metadata), the named size presets,
// and the checks that a config can build a model, free of the engine so that reading a config
// links no device code. Package settransformer builds the model and re-exports everything here.
package modelcfg

import (
	"fmt"
	"sort"

	"github.com/gelo-research/geloattack/internal/field"
)

// Task selects which head sits on top of the encoder.
type Task string

const (
	// TaskRetrieval ranks candidate texts from the CLS state (SPEC §4, retrieval head).
	TaskRetrieval Task = "retrieval"
	// TaskUnmix decodes slot queries into estimated clean rows (SPEC §4, unmixing head).
	TaskUnmix Task = "unmix"
	// TaskLM trains a decoder language model (the run config's lm section) instead of an
	// attack; the set model's keys are not used.
	TaskLM Task = "lm"
)

// DefaultTemperature is the InfoNCE temperature tau of SPEC §5.
const DefaultTemperature = 0.05

// DefaultEps is the RMSNorm epsilon of SPEC §4.
const DefaultEps = 1e-5

// MinEps and MaxEps bound the RMSNorm epsilon a config may set. The engine computes in float32:
// below MinEps eps would round towards 0 (an all-zero padded row would divide by zero), and an
// eps above MaxEps would swamp the rows' mean square (hidden states are O(1) after the input
// projection), which is no longer RMS normalisation.
const (
	MinEps = 1e-30
	MaxEps = 1.0
)

// Config is every size and switch of the model; it is stored as JSON in checkpoint metadata, so
// the tags are part of the file format.
type Config struct {
	// InputDim is d, the width of the rows of U.
	InputDim int `json:"input_dim" yaml:"input_dim"`
	// CandidateDim is e, the width of the text-level candidate embeddings.
	CandidateDim int `json:"candidate_dim" yaml:"candidate_dim"`
	// Hidden is h, the width of the residual stream.
	Hidden int `json:"hidden" yaml:"hidden"`
	// Layers is the number of encoder blocks.
	Layers int `json:"layers" yaml:"layers"`
	// Heads is the number of attention heads; it must divide Hidden.
	Heads int `json:"heads" yaml:"heads"`
	// MLPHidden is the SwiGLU inner width.
	MLPHidden int `json:"mlp_hidden" yaml:"mlp_hidden"`
	// Eps is the RMSNorm epsilon of every norm of the model (encoder and decoder), in
	// [MinEps, MaxEps].
	Eps float64 `json:"eps" yaml:"eps"`
	// Task is retrieval or unmix.
	Task Task `json:"task" yaml:"task"`
	// DecLayers is the number of unmixing decoder blocks (task unmix only).
	DecLayers int `json:"dec_layers" yaml:"dec_layers"`
	// Slots is S, the number of learned slot queries of the unmixing decoder (task unmix only).
	Slots int `json:"slots" yaml:"slots"`
	// Temperature is the initial InfoNCE temperature tau.
	Temperature float64 `json:"temperature" yaml:"temperature"`
	// LearnTemperature makes tau a trained parameter (stored as the parameter log_tau).
	LearnTemperature bool `json:"learn_temperature" yaml:"learn_temperature"`
}

// presets are the named sizes; tiny and small are for quick runs, paper is the GELO paper's model.
var presets = map[string]Config{
	"tiny":  {Hidden: 128, Layers: 2, Heads: 4, MLPHidden: 512},
	"small": {Hidden: 256, Layers: 4, Heads: 8, MLPHidden: 1024},
	"paper": {Hidden: 384, Layers: 24, Heads: 12, MLPHidden: 1536},
}

// PresetNames lists the preset names in sorted order.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the named size with d = e = 4096 (Llama-2 7B), the retrieval task, eps 1e-5 and
// tau 0.05; callers set InputDim and CandidateDim from their store.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("settransformer: unknown preset %q (want one of %v)", name, PresetNames())
	}
	c.InputDim, c.CandidateDim = 4096, 4096
	c.Eps = DefaultEps
	c.Task = TaskRetrieval
	c.Temperature = DefaultTemperature
	return c, nil
}

// HeadDim is Hidden / Heads.
func (c Config) HeadDim() int {
	if c.Heads == 0 {
		return 0
	}
	return c.Hidden / c.Heads
}

// Rules is every numeric field of Config with its bounds: Validate checks them before the rules
// that tie fields together. input_dim and candidate_dim may be 0 in a run config (filled from the
// store), which the run config's check allows for itself. The maxima are far above any real model;
// they keep a value from reaching an allocation that panics.
var Rules = field.Table[Config]{
	{Key: "input_dim", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.InputDim) }},
	{Key: "candidate_dim", Bounds: field.Bounds{Int: true, Min: 0, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.CandidateDim) }},
	{Key: "hidden", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 15}, Get: func(c Config) float64 { return float64(c.Hidden) }},
	{Key: "layers", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 10}, Get: func(c Config) float64 { return float64(c.Layers) }},
	{Key: "heads", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 10}, Get: func(c Config) float64 { return float64(c.Heads) }},
	{Key: "mlp_hidden", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 17}, Get: func(c Config) float64 { return float64(c.MLPHidden) }},
	{Key: "eps", Bounds: field.Bounds{Min: MinEps, Max: MaxEps}, Get: func(c Config) float64 { return c.Eps }},
	{Key: "dec_layers", Bounds: field.Bounds{Int: true, Min: 0, Max: 1 << 10}, Get: func(c Config) float64 { return float64(c.DecLayers) }},
	{Key: "slots", Bounds: field.Bounds{Int: true, Min: 0, Max: 1 << 16}, Get: func(c Config) float64 { return float64(c.Slots) }},
	// The logits are cos/tau in float32: below 1e-4 they overflow at the first step, above 1e4
	// every softmax is uniform.
	{Key: "temperature", Bounds: field.Bounds{Min: 1e-4, Max: 1e4}, Get: func(c Config) float64 { return c.Temperature }},
}

// Validate reports the first field that cannot build a model, as a *field.Error naming the key.
func (c Config) Validate() error {
	if err := Rules.Check(c); err != nil {
		return err
	}
	if c.Hidden%c.Heads != 0 {
		return field.Errorf("heads", "%d does not divide hidden = %d", c.Heads, c.Hidden)
	}
	switch c.Task {
	case TaskRetrieval:
		if c.CandidateDim <= 0 {
			return field.Errorf("candidate_dim", "%d, want > 0 for task %q", c.CandidateDim, c.Task)
		}
	case TaskUnmix:
		if c.DecLayers <= 0 {
			return field.Errorf("dec_layers", "%d, want > 0 for task %q", c.DecLayers, c.Task)
		}
		if c.Slots <= 0 {
			return field.Errorf("slots", "%d, want > 0 for task %q", c.Slots, c.Task)
		}
	case TaskLM:
	case "":
		return field.Errorf("task", "empty, want retrieval, unmix or lm")
	default:
		return field.Errorf("task", "%q, want retrieval, unmix or lm", c.Task)
	}
	return nil
}
