package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// crossEntropy: lse[r] = log sum_v exp(logits[r, v]), nll[r] = lse[r] -
// logits[r, targets[r]]; logits: (c, V), targets, lse, nll: (c).
func (c *Backend) crossEntropy(nll, lse, logits, targets *engine.Tensor) {
	rows, V := logits.Dim(0), logits.Dim(1)
	ls, ns, ts, lg := f32(lse), f32(nll), f32(targets), f32(logits)
	c.parallelRows(rows, V, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			row := lg[r*V : (r+1)*V]
			l := logSumExp(row, nil)
			ls[r] = l
			ns[r] = l - row[int(ts[r])]
		}
	})
}

// crossEntropyBackward: logits[r] <- scale * dy * (exp(logits[r] - lse[r]) -
// onehot(targets[r])), in place.
func (c *Backend) crossEntropyBackward(logits, lse, targets, dy *engine.Tensor, scale float32) {
	rows, V := logits.Dim(0), logits.Dim(1)
	ls, ts, lg := f32(lse), f32(targets), f32(logits)
	g := scale * f32(dy)[0]
	c.parallelRows(rows, V, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			row, l := lg[r*V:(r+1)*V], ls[r]
			if math.IsInf(float64(l), 0) || l != l {
				// A non-finite row (overflowed activations) has no
				// softmax: propagate NaN so the finiteness check sees it.
				l = float32(math.NaN())
			}
			for v, x := range row {
				row[v] = g * expf(x-l)
			}
			row[int(ts[r])] -= g
		}
	})
}
