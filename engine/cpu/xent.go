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
	c.parallelRows(rows, V, func(w, lo, hi int) {
		e := c.scratchFor(w, V) // exp(row - max), (V)
		for r := lo; r < hi; r++ {
			row := lg[r*V : (r+1)*V]
			l := logSumExpVec(row, e)
			ls[r] = l
			ns[r] = l - row[int(ts[r])]
		}
	})
}

// logSumExpVec is log sum_v exp(x[v]) with the exponentials eight lanes at a time (expAffine)
// into scratch e (len(x)) and summed in float64 as logSumExp sums them; ±Inf and NaN rows as
// logSumExp. A (32000)-wide row of the vocabulary spends most of its time here.
func logSumExpVec(x, e []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	if math.IsInf(float64(mx), 0) || mx != mx {
		return logSumExp(x, nil)
	}
	expAffine(e, x, 1, -mx)
	var s float64
	for _, v := range e {
		s += float64(v)
	}
	return mx + float32(math.Log(s))
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
			expAffine(row, row, 1, -l)
			for v := range row {
				row[v] *= g
			}
			row[int(ts[r])] -= g
		}
	})
}
