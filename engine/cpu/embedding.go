package cpu

import "github.com/gelo-research/geloattack/engine"

// embedding: y[t] = table[ids[t]]; table: (V, d), ids: (T) -> y: (T, d).
func (c *Backend) embedding(y, table, ids *engine.Tensor) {
	d := table.Dim(1)
	ys, ts, is := f32(y), f32(table), f32(ids)
	c.parallelRows(len(is), d, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			id := int(is[t])
			copy(ys[t*d:(t+1)*d], ts[id*d:(id+1)*d])
		}
	})
}

// embeddingBackward: dtable[ids[t]] += dy[t]. Serial in t: repeated ids add
// into the same row, and one pass in token order keeps the sum deterministic.
func (c *Backend) embeddingBackward(dtable, dy, ids *engine.Tensor) {
	d := dtable.Dim(1)
	dts, dys := f32(dtable), f32(dy)
	for t, v := range f32(ids) {
		id := int(v)
		dst, src := dts[id*d:(id+1)*d], dys[t*d:(t+1)*d]
		for j, g := range src {
			dst[j] += g
		}
	}
}
