package cpu

import "github.com/gelo-research/geloattack/engine"

// Adopt views data as the backend's storage (engine.HostMemory): the CPU computes in host memory.
func (c *Backend) Adopt(data []float32) engine.Storage { return &storage{be: c, data: data} }

// HostSlice is t's elements in place (engine.HostMemory).
func (c *Backend) HostSlice(t *engine.Tensor) []float32 { return f32(t) }
