package bert

import (
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// NewModelFromFile is newModel, for the external tests (the fuzz test feeds it parsed bytes).
func NewModelFromFile(cfg Config, st *safetensors.File, lib *blas.Library) (*Model, error) {
	return newModel(cfg, st, lib)
}
