package train

import "github.com/gelo-research/geloattack/train/trainopts"

// Options is the trainer's section of a run config (trainopts.Options). Every field has a
// documented default in DefaultOptions.
type Options = trainopts.Options

// DefaultOptions returns the documented defaults (trainopts.DefaultOptions).
func DefaultOptions() Options { return trainopts.DefaultOptions() }
