package cpu

import "github.com/gelo-research/geloattack/engine"

// rope rotates each head's pairs (i, i+hd/2) of every row by its position's
// angle (engine.RoPE), reading cos and sin from the (T, hd) table; the
// arithmetic is models/llama's rotate, so both give the same float32 bits
// for the same table.
func (c *Backend) rope(y, x, table *engine.Tensor, heads int) {
	M, w := x.Rows(), x.Cols()
	T, hd := table.Dim(0), table.Dim(1)
	half := hd / 2
	xs, ys, ts := f32(x), f32(y), f32(table)
	c.parallelRows(M, w, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			tr := ts[(r%T)*hd : (r%T+1)*hd]
			cos, sin := tr[:half], tr[half:]
			for j := range heads {
				xr, yr := xs[r*w+j*hd:r*w+(j+1)*hd], ys[r*w+j*hd:r*w+(j+1)*hd]
				for i := range half {
					a, b := xr[i], xr[i+half]
					yr[i] = a*cos[i] - b*sin[i]
					yr[i+half] = b*cos[i] + a*sin[i]
				}
			}
		}
	})
}

// ropeBackward accumulates the inverse rotation of dy into dx: the
// rotation is orthogonal, so its transpose is the rotation by minus the angle.
func (c *Backend) ropeBackward(dx, dy, table *engine.Tensor, heads int) {
	M, w := dy.Rows(), dy.Cols()
	T, hd := table.Dim(0), table.Dim(1)
	half := hd / 2
	dxs, dys, ts := f32(dx), f32(dy), f32(table)
	c.parallelRows(M, w, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			tr := ts[(r%T)*hd : (r%T+1)*hd]
			cos, sin := tr[:half], tr[half:]
			for j := range heads {
				gr, dr := dys[r*w+j*hd:r*w+(j+1)*hd], dxs[r*w+j*hd:r*w+(j+1)*hd]
				for i := range half {
					a, b := gr[i], gr[i+half]
					dr[i] += a*cos[i] + b*sin[i]
					dr[i+half] += b*cos[i] - a*sin[i]
				}
			}
		}
	})
}
