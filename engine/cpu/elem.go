package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// swiGLU: y = g * sigmoid(g) * u.
func (c *Backend) swiGLU(y, gate, up *engine.Tensor) {
	ys, gs, us := f32(y), f32(gate), f32(up)
	c.parallelElems(len(ys), func(lo, hi int) {
		yy, gg, uu := ys[lo:hi], gs[lo:hi], us[lo:hi]
		expAffine(yy, gg, -1, 0) // exp(-g), then overwritten
		swigluForward(yy, gg, uu)
	})
}

// swigluBlock is how many sigmoids swiGLUBackward computes at a time into
// worker scratch (small enough to stay in L1).
const swigluBlock = 1024

// swiGLUBackward: with s = sigmoid(g): dg (+)= dy u s (1 + g (1 - s)),
// du (+)= dy g s.
func (c *Backend) swiGLUBackward(dgate, dup, dy, gate, up *engine.Tensor, accGate, accUp bool) {
	dgs, dus, dys, gs, us := f32(dgate), f32(dup), f32(dy), f32(gate), f32(up)
	c.parallelRows(len(dys), 1, func(w, lo, hi int) {
		e := c.scratchFor(w, swigluBlock)
		for blo := lo; blo < hi; blo += swigluBlock {
			bhi := min(blo+swigluBlock, hi)
			eb := e[:bhi-blo]
			expAffine(eb, gs[blo:bhi], -1, 0) // exp(-g)
			// Both gradients, as a model's SwiGLU always asks: the eight-lane loop.
			if dgs != nil && dus != nil {
				swigluBackward(dgs[blo:bhi], dus[blo:bhi], dys[blo:bhi], gs[blo:bhi], us[blo:bhi], eb, accGate, accUp)
				continue
			}
			for j, ev := range eb {
				i := blo + j
				g, d := gs[i], dys[i]
				s := 1 / (1 + ev)
				if dgs != nil {
					v := d * us[i] * s * (1 + g*(1-s))
					if accGate {
						v += dgs[i]
					}
					dgs[i] = v
				}
				if dus != nil {
					v := d * g * s
					if accUp {
						v += dus[i]
					}
					dus[i] = v
				}
			}
		}
	})
}

// Unary: y = f(x, c); y may alias x.
func (c *Backend) Unary(op engine.UnaryOp, y, x *engine.Tensor, k float32) {
	ys, xs := f32(y), f32(x)
	c.parallelElems(len(ys), func(lo, hi int) {
		yy, xx := ys[lo:hi], xs[lo:hi]
		switch op {
		case engine.UnaryScale:
			for i, v := range xx {
				yy[i] = k * v
			}
		case engine.UnaryAddScalar:
			for i, v := range xx {
				yy[i] = v + k
			}
		case engine.UnaryExp:
			for i, v := range xx {
				yy[i] = expf(v)
			}
		case engine.UnaryLog:
			for i, v := range xx {
				yy[i] = float32(math.Log(float64(v)))
			}
		case engine.UnarySquare:
			for i, v := range xx {
				yy[i] = v * v
			}
		case engine.UnarySqrt:
			for i, v := range xx {
				yy[i] = float32(math.Sqrt(float64(v)))
			}
		}
	})
}

// UnaryBackward accumulates dx from dy, x and the output y.
func (c *Backend) UnaryBackward(op engine.UnaryOp, dx, dy, x, y *engine.Tensor, k float32) {
	dxs, dys, xs, ys := f32(dx), f32(dy), f32(x), f32(y)
	c.parallelElems(len(dxs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := dys[i]
			switch op {
			case engine.UnaryScale:
				dxs[i] += k * g
			case engine.UnaryAddScalar:
				dxs[i] += g
			case engine.UnaryExp:
				dxs[i] += g * ys[i]
			case engine.UnaryLog:
				dxs[i] += g / xs[i]
			case engine.UnarySquare:
				dxs[i] += 2 * g * xs[i]
			case engine.UnarySqrt:
				dxs[i] += g / (2 * ys[i])
			}
		}
	})
}

// Binary: y = f(a, b), b of a's size or one element.
func (c *Backend) Binary(op engine.BinaryOp, y, a, b *engine.Tensor) {
	ys, as, bs := f32(y), f32(a), f32(b)
	scalar := len(bs) == 1 && len(as) != 1
	c.parallelElems(len(ys), func(lo, hi int) {
		yy, aa := ys[lo:hi], as[lo:hi]
		if scalar {
			bv := bs[0]
			switch op {
			case engine.BinaryAdd:
				for i, v := range aa {
					yy[i] = v + bv
				}
			case engine.BinarySub:
				for i, v := range aa {
					yy[i] = v - bv
				}
			case engine.BinaryMul:
				for i, v := range aa {
					yy[i] = v * bv
				}
			case engine.BinaryDiv:
				for i, v := range aa {
					yy[i] = v / bv
				}
			}
			return
		}
		bb := bs[lo:hi]
		switch op {
		case engine.BinaryAdd:
			for i, v := range aa {
				yy[i] = v + bb[i]
			}
		case engine.BinarySub:
			for i, v := range aa {
				yy[i] = v - bb[i]
			}
		case engine.BinaryMul:
			for i, v := range aa {
				yy[i] = v * bb[i]
			}
		case engine.BinaryDiv:
			for i, v := range aa {
				yy[i] = v / bb[i]
			}
		}
	})
}

// BinaryBackward accumulates da and db; a one-element b gets the sum.
func (c *Backend) BinaryBackward(op engine.BinaryOp, da, db, dy, a, b *engine.Tensor) {
	das, dbs, dys, as, bs := f32(da), f32(db), f32(dy), f32(a), f32(b)
	scalar := len(bs) == 1 && len(dys) != 1
	bAt := func(i int) float32 {
		if scalar {
			return bs[0]
		}
		return bs[i]
	}
	if das != nil && (op == engine.BinaryAdd || op == engine.BinarySub) {
		c.Axpy(da, 1, dy)
	} else if das != nil {
		c.parallelElems(len(dys), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				switch op {
				case engine.BinaryAdd, engine.BinarySub:
					das[i] += dys[i]
				case engine.BinaryMul:
					das[i] += dys[i] * bAt(i)
				case engine.BinaryDiv:
					das[i] += dys[i] / bAt(i)
				}
			}
		})
	}
	if dbs == nil {
		return
	}
	grad := func(i int) float32 {
		switch op {
		case engine.BinaryAdd:
			return dys[i]
		case engine.BinarySub:
			return -dys[i]
		case engine.BinaryMul:
			return dys[i] * as[i]
		default: // Div: d(a/b)/db = -a/b^2
			bv := bAt(i)
			return -dys[i] * as[i] / (bv * bv)
		}
	}
	if !scalar && (op == engine.BinaryAdd || op == engine.BinarySub) {
		sign := float32(1)
		if op == engine.BinarySub {
			sign = -1
		}
		c.Axpy(db, sign, dy)
		return
	}
	if scalar {
		var s float64
		for i := range dys {
			s += float64(grad(i))
		}
		dbs[0] += float32(s)
		return
	}
	c.parallelElems(len(dys), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dbs[i] += grad(i)
		}
	})
}

// AdamW updates p in place (see AdamWStep), PyTorch's order: decay first,
// then the Adam step with bias-corrected moments; g is zeroed.
func (c *Backend) AdamW(p, g, m, v *engine.Tensor, s engine.AdamWStep) {
	ps, gs, ms, vs := f32(p), f32(g), f32(m), f32(v)
	k := &adamwConsts{b1: s.Beta1, c1: 1 - s.Beta1, b2: s.Beta2, c2: 1 - s.Beta2,
		decay: 1 - s.LR*s.Decay, step: s.LR / s.BiasCorr1, invBC2: 1 / s.BiasCorr2, eps: s.Eps}
	c.parallelElems(len(ps), func(lo, hi int) {
		adamwUpdate(ps[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi], k)
	})
}
