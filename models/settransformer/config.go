// Package settransformer is the permutation-equivariant set-transformer attack of SPEC §4: a
// Llama-2-style pre-norm encoder over the rows of an obfuscated example U, under two heads. The
// retrieval model (Model) prepends a learned CLS vector whose final state feeds the retrieval
// head. The unmixing model (UnmixModel) encodes the rows alone and decodes S learned slot queries
// into estimated clean rows H_hat, with the mixing head A_hat = (E Wq)(Z Wk)^T / sqrt(h).
package settransformer

import "github.com/gelo-research/geloattack/models/settransformer/modelcfg"

// Task selects which head sits on top of the encoder (modelcfg.Task).
type Task = modelcfg.Task

const (
	// TaskRetrieval ranks candidate texts from the CLS state (SPEC §4, retrieval head).
	TaskRetrieval = modelcfg.TaskRetrieval
	// TaskUnmix decodes slot queries into estimated clean rows (SPEC §4, unmixing head).
	TaskUnmix = modelcfg.TaskUnmix
)

// DefaultTemperature is the InfoNCE temperature tau of SPEC §5.
const DefaultTemperature = modelcfg.DefaultTemperature

// DefaultEps is the RMSNorm epsilon of SPEC §4.
const DefaultEps = modelcfg.DefaultEps

// MinEps and MaxEps bound the RMSNorm epsilon a config may set (see modelcfg).
const (
	// MinEps is the smallest RMSNorm epsilon a config may set.
	MinEps = modelcfg.MinEps
	// MaxEps is the largest RMSNorm epsilon a config may set.
	MaxEps = modelcfg.MaxEps
)

// Config is every size and switch of the model (modelcfg.Config); it is stored as JSON in
// checkpoint metadata, so the tags are part of the file format.
type Config = modelcfg.Config

// PresetNames lists the preset names in sorted order (modelcfg.PresetNames).
func PresetNames() []string { return modelcfg.PresetNames() }

// Preset returns the named size with d = e = 4096 (modelcfg.Preset); callers set InputDim and
// CandidateDim from their store.
func Preset(name string) (Config, error) { return modelcfg.Preset(name) }

// hasCLS reports whether the encoder prepends a learned CLS row: every task but unmix, whose
// heads read the row states alone.
func hasCLS(c Config) bool { return c.Task != TaskUnmix }
