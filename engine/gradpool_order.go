package engine

import (
	"cmp"
	"slices"
)

// canonical puts every free list of the pool in allocation order. Reset calls it once all of a
// step's gradient buffers are back, so the buffers a step gets depend only on that step's own
// requests, not on the order earlier steps returned them in: two identical steps then use the
// same buffers at the same addresses (what a CUDA graph of a step needs, engine/cuda/graph.go).
// Without it the returns of one step reorder the next step's buffers (a 3-block model's steps
// alternated between two assignments). Results do not depend on which buffer a gradient gets:
// every buffer is overwritten or cleared before it is read (see Tape.ensureGrad).
func (p *gradPool) canonical() {
	for _, l := range p.free {
		slices.SortFunc(l, func(a, b Storage) int { return cmp.Compare(p.seq[a], p.seq[b]) })
	}
}
