// Package layering states the import order of the module's packages, floor by floor, so a test
// can hold the tree to it: a package imports only packages on its own floor or below. Floors
// (low to high), as docs/ARCHITECTURE.md lists them:
//
//	0  internal/..., engine/blas, eval/assign          leaves
//	1  engine, engine/cpu, engine/cuda, engine/device  the compute engine
//	2  data/..., the config schema leaves              stores, tokenizers, the GELO sampler
//	3  models/..., losses/..., eval, checkpoints       what trains and what scores
//	4  baselines/..., tasks/..., protocol/..., config  attacks, tasks, the protocol, run configs;
//	   extraction                                      the store-extraction pipelines
//	5  train                                           the loop
//	6  runner, assess                                  a resolved config -> a run; the assessment
//	7  sweep/...                                       grids of runs and their reports
//	8  cmd/...                                         the CLI
package layering

import "strings"

// Module is the module path the floors are stated for.
const Module = "github.com/gelo-research/geloattack"

// floors maps a package path (relative to Module) prefix to its floor; the longest prefix wins.
var floors = []struct {
	prefix string
	floor  int
}{
	{"internal", 0}, {"engine/blas", 0}, {"eval/assign", 0},
	{"engine", 1},
	{"data", 2},
	// Schema leaves: each owner re-exports its section's config; they sit with data (trainopts
	// reads the sampler's default set bucket from data/gelo).
	{"train/trainopts", 2}, {"models/settransformer/modelcfg", 2}, {"losses/ot/otcfg", 2},
	{"models/causallm/lmcfg", 2}, {"engine/device/devspec", 0},
	{"models", 3}, {"losses", 3}, {"eval", 3}, {"checkpoints", 3},
	{"baselines", 4}, {"tasks", 4}, {"protocol", 4}, {"config", 4}, {"configs", 4}, {"extraction", 4},
	{"train", 5},
	{"runner", 6}, {"assess", 6},
	{"sweep", 7},
	{"cmd", 8},
}

// Floor returns the floor of a package path relative to Module, and false for a path no rule
// names.
func Floor(rel string) (int, bool) {
	best, floor := -1, 0
	for _, f := range floors {
		if (rel == f.prefix || strings.HasPrefix(rel, f.prefix+"/")) && len(f.prefix) > best {
			best, floor = len(f.prefix), f.floor
		}
	}
	return floor, best >= 0
}

// Exceptions are imports that run up a floor, each with its reason (the test fails on an entry no
// import needs). No non-test code needs one: data imports no models (the extraction pipelines,
// which run models, sit above both).
var Exceptions = map[[2]string]string{
	// External test packages (package x_test) that check one floor against an oracle above it;
	// no non-test code runs up a floor.
	{"data/deployer", "models/hf"}:       "test only: writes random-init checkpoints for the PyTorch deployer to run",
	{"data/deployer", "models/llama"}:    "test only: compares the PyTorch deployer's rows with the decoder forward",
	{"data/deployer", "models/causallm"}: "test only: the decoder forward (models/causallm's Decoder) whose rows the PyTorch deployer's are compared with",
}

// Forbidden lists, per package, packages that must not be linked at all (directly or
// indirectly): reading a config links no device code and no store, and the metrics do not link
// the training loop.
var Forbidden = map[string][]string{
	"config": {"train", "engine", "engine/cpu", "engine/cuda", "engine/device", "models/settransformer",
		"losses/ot", "checkpoints", "data/store", "data/synth"},
	"eval": {"train"},
}
