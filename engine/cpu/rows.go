package cpu

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// reduceChunks is the fixed number of pieces a reduction is split into.
// Partial results are kept per piece and added in piece order, so sums do
// not depend on which worker ran what: results are bit-reproducible.
const reduceChunks = 16

// parallelReduce runs fn over rows [0, n) in reduceChunks pieces, each adding
// into its own zeroed partial of width elements, then adds the partials into
// out in piece order.
func (c *Backend) parallelReduce(n, rowCost, width int, out []float32, fn func(lo, hi int, acc []float32)) {
	pieces := min(n, reduceChunks)
	if len(c.reduceBuf) < pieces*width {
		c.reduceBuf = make([]float32, pieces*width)
	}
	part := c.reduceBuf[:pieces*width]
	clear(part)
	c.parallelRows(pieces, rowCost*n/max(1, pieces), func(_, plo, phi int) {
		for p := plo; p < phi; p++ {
			fn(p*n/pieces, (p+1)*n/pieces, part[p*width:(p+1)*width])
		}
	})
	for p := range pieces {
		for j, v := range part[p*width : (p+1)*width] {
			out[j] += v
		}
	}
}

// rmsNorm: y = x * rstd * w per row, rstd = 1/sqrt(mean(x^2) + eps).
func (c *Backend) rmsNorm(y, rstd, x, w *engine.Tensor, eps float32) {
	M, h := x.Rows(), x.Cols()
	xs, ys, rs, ws := f32(x), f32(y), f32(rstd), f32(w)
	c.parallelRows(M, h, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := xs[r*h:(r+1)*h], ys[r*h:(r+1)*h]
			var ss float32
			for _, v := range xr {
				ss += v * v
			}
			inv := float32(1 / math.Sqrt(float64(ss/float32(h)+eps)))
			rs[r] = inv
			scaledProduct(yr, xr, ws, inv)
		}
	})
}

// rmsNormBackward: with xhat = x*rstd and g = dy*w,
// dx += rstd * (g - xhat * mean(g * xhat)), dw += sum_rows dy * xhat.
func (c *Backend) rmsNormBackward(dx, dw, dy, x, w, rstd *engine.Tensor) {
	M, h := x.Rows(), x.Cols()
	xs, dys, rs, ws, dxs := f32(x), f32(dy), f32(rstd), f32(w), f32(dx)
	body := func(lo, hi int, acc []float32) {
		for r := lo; r < hi; r++ {
			xr, gr, inv := xs[r*h:(r+1)*h], dys[r*h:(r+1)*h], rs[r]
			if acc != nil {
				accScaledProduct(acc[:h], gr, xr, inv)
			}
			if dxs == nil {
				continue
			}
			var dot float32 // sum_j g_j xhat_j
			for j, v := range xr {
				dot += gr[j] * ws[j] * v * inv
			}
			dot /= float32(h)
			rmsNormGrad(dxs[r*h:(r+1)*h], gr, xr, ws, inv, dot)
		}
	}
	if dw == nil {
		c.parallelRows(M, h, func(_, lo, hi int) { body(lo, hi, nil) })
		return
	}
	c.parallelReduce(M, h, h, f32(dw), body)
}

// l2Normalize: y = x / max(||x||, eps), norm = ||x|| per row.
func (c *Backend) l2Normalize(y, norm, x *engine.Tensor, eps float32) {
	M, e := x.Rows(), x.Cols()
	xs, ys, ns := f32(x), f32(y), f32(norm)
	c.parallelRows(M, e, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := xs[r*e:(r+1)*e], ys[r*e:(r+1)*e]
			var ss float64
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			n := float32(math.Sqrt(ss))
			ns[r] = n
			inv := 1 / max(n, eps)
			for j, v := range xr {
				yr[j] = v * inv
			}
		}
	})
}

// l2NormalizeBackward: dx += (dy - y (dy.y)) / ||x|| when ||x|| > eps, else
// dy / eps (the clamp is constant there).
func (c *Backend) l2NormalizeBackward(dx, dy, y, norm *engine.Tensor, eps float32) {
	M, e := y.Rows(), y.Cols()
	dxs, dys, ys, ns := f32(dx), f32(dy), f32(y), f32(norm)
	c.parallelRows(M, e, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, gr, dr := ys[r*e:(r+1)*e], dys[r*e:(r+1)*e], dxs[r*e:(r+1)*e]
			if ns[r] <= eps {
				for j, g := range gr {
					dr[j] += g / eps
				}
				continue
			}
			var dot float32
			for j, v := range yr {
				dot += v * gr[j]
			}
			inv := 1 / ns[r]
			for j, v := range yr {
				dr[j] += (gr[j] - v*dot) * inv
			}
		}
	})
}

// rowReduce: y[r] = LSE or norm of row r.
func (c *Backend) rowReduce(op engine.RowOp, y, x *engine.Tensor) {
	M, C := x.Rows(), x.Cols()
	xs, ys := f32(x), f32(y)
	c.parallelRows(M, C, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := xs[r*C : (r+1)*C]
			switch op {
			case engine.RowLogSumExp:
				ys[r] = logSumExp(xr, nil)
			case engine.RowNorm:
				var ss float64
				for _, v := range xr {
					ss += float64(v) * float64(v)
				}
				ys[r] = float32(math.Sqrt(ss))
			}
		}
	})
}

// logSumExp is log sum_j exp(x_j) over entries with mask 1 (all when mask is
// nil), computed as max + log sum exp(x - max); -Inf for an empty set.
func logSumExp(x, mask []float32) float32 {
	mx := float32(math.Inf(-1))
	for j, v := range x {
		if (mask == nil || mask[j] > 0.5) && v > mx {
			mx = v
		}
	}
	if math.IsInf(float64(mx), -1) {
		return mx
	}
	if math.IsInf(float64(mx), 1) || mx != mx {
		return mx
	}
	var s float64
	for j, v := range x {
		if mask == nil || mask[j] > 0.5 {
			s += float64(expf(v - mx))
		}
	}
	return mx + float32(math.Log(s))
}

// rowReduceBackward: LSE: dx += dy * exp(x - y); norm: dx += dy * x / y
// (0 where the norm is 0).
func (c *Backend) rowReduceBackward(op engine.RowOp, dx, dy, x, y *engine.Tensor) {
	M, C := x.Rows(), x.Cols()
	xs, ys, dxs, dys := f32(x), f32(y), f32(dx), f32(dy)
	c.parallelRows(M, C, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dr, g, l := xs[r*C:(r+1)*C], dxs[r*C:(r+1)*C], dys[r], ys[r]
			switch op {
			case engine.RowLogSumExp:
				for j, v := range xr {
					dr[j] += g * expf(v-l)
				}
			case engine.RowNorm:
				if l == 0 {
					continue
				}
				s := g / l
				for j, v := range xr {
					dr[j] += s * v
				}
			}
		}
	})
}

// scaleRows: y[r, :] (+)= x[r, :] * s[r].
func (c *Backend) scaleRows(y, x, s *engine.Tensor, accumulate bool) {
	M, h := x.Rows(), x.Cols()
	xs, ys, ss := f32(x), f32(y), f32(s)
	c.parallelRows(M, h, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr, f := xs[r*h:(r+1)*h], ys[r*h:(r+1)*h], ss[r]
			for j, v := range xr {
				if accumulate {
					yr[j] += v * f
				} else {
					yr[j] = v * f
				}
			}
		}
	})
}

// meanWeight is 1/(number of real rows of set b), 0 for an empty set.
func meanWeight(mask []float32, b, N int) float32 {
	if mask == nil {
		if N == 0 {
			return 0
		}
		return 1 / float32(N)
	}
	var n int
	for _, v := range mask[b*N : (b+1)*N] {
		if v > 0.5 {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return 1 / float32(n)
}

// meanPool: y[b] = mean of the real rows of x[b].
func (c *Backend) meanPool(y, x, mask *engine.Tensor) {
	B, N, h := x.Dim(0), x.Dim(1), x.Dim(2)
	xs, ys, ms := f32(x), f32(y), f32(mask)
	c.parallelRows(B, N*h, func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			yr := ys[b*h : (b+1)*h]
			clear(yr)
			wgt := meanWeight(ms, b, N)
			for i := range N {
				if ms != nil && ms[b*N+i] <= 0.5 {
					continue
				}
				for j, v := range xs[(b*N+i)*h : (b*N+i+1)*h] {
					yr[j] += v
				}
			}
			for j := range yr {
				yr[j] *= wgt
			}
		}
	})
}

// meanPoolBackward: dx[b, i] += dy[b] / count for real rows i.
func (c *Backend) meanPoolBackward(dx, dy, mask *engine.Tensor) {
	B, N, h := dx.Dim(0), dx.Dim(1), dx.Dim(2)
	dxs, dys, ms := f32(dx), f32(dy), f32(mask)
	c.parallelRows(B, N*h, func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			g, wgt := dys[b*h:(b+1)*h], meanWeight(ms, b, N)
			for i := range N {
				if ms != nil && ms[b*N+i] <= 0.5 {
					continue
				}
				dr := dxs[(b*N+i)*h : (b*N+i+1)*h]
				for j, v := range g {
					dr[j] += v * wgt
				}
			}
		}
	})
}

// infoNCE: y = mean_b (LSE_c s_bc - LSE_{p: pos_bp = 1} s_bp).
func (c *Backend) infoNCE(y, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	ss, ps := f32(scores), f32(pos)
	var total float64
	for b := range B {
		sr, pr := ss[b*C:(b+1)*C], ps[b*C:(b+1)*C]
		total += float64(logSumExp(sr, nil)) - float64(logSumExp(sr, pr))
	}
	f32(y)[0] = float32(total / float64(B))
}

// infoNCEBackward: ds_bc += dy/B * (softmax(s_b)_c - pos_bc softmax_P(s_b)_c).
func (c *Backend) infoNCEBackward(ds, dy, scores, pos *engine.Tensor) {
	B, C := scores.Dim(0), scores.Dim(1)
	ss, ps, dss := f32(scores), f32(pos), f32(ds)
	g := f32(dy)[0] / float32(B)
	c.parallelRows(B, C, func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			sr, pr, dr := ss[b*C:(b+1)*C], ps[b*C:(b+1)*C], dss[b*C:(b+1)*C]
			all, onPos := logSumExp(sr, nil), logSumExp(sr, pr)
			for j, v := range sr {
				d := expf(v - all)
				if pr[j] > 0.5 {
					d -= expf(v - onPos)
				}
				dr[j] += g * d
			}
		}
	})
}

// Reduce: y = sum x or sum x^2 (accumulated in float64).
func (c *Backend) Reduce(op engine.ReduceOp, y, x *engine.Tensor) {
	var s float64
	switch op {
	case engine.ReduceSum:
		s = c.sumHost(x, false)
	case engine.ReduceSumSquares:
		s = c.sumHost(x, true)
	}
	f32(y)[0] = float32(s)
}

// ReduceBackward: dx += dy (sum) or dx += 2 dy x (sum of squares).
func (c *Backend) ReduceBackward(op engine.ReduceOp, dx, dy, x *engine.Tensor) {
	g := f32(dy)[0]
	switch op {
	case engine.ReduceSum:
		d := f32(dx)
		c.parallelElems(len(d), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] += g
			}
		})
	case engine.ReduceSumSquares:
		c.Axpy(dx, 2*g, x)
	}
}

// SumSquaresHost returns sum x^2 in float64.
func (c *Backend) SumSquaresHost(x *engine.Tensor) float64 {
	c.hostReads.Add(1)
	return c.sumHost(x, true)
}

// sumHost sums x (or x^2) in float64, in reduceChunks pieces added in
// order (bit-reproducible whatever the scheduling).
func (c *Backend) sumHost(x *engine.Tensor, squares bool) float64 {
	xs := f32(x)
	n := len(xs)
	var parts [reduceChunks]float64
	pieces := min(n, reduceChunks)
	c.parallelRows(pieces, n/max(1, pieces), func(_, plo, phi int) {
		for p := plo; p < phi; p++ {
			var s float64
			for _, v := range xs[p*n/pieces : (p+1)*n/pieces] {
				if squares {
					s += float64(v) * float64(v)
				} else {
					s += float64(v)
				}
			}
			parts[p] = s
		}
	})
	var s float64
	for _, p := range parts[:pieces] {
		s += p
	}
	return s
}

// Transpose: y (..., m, n) (+)= x (..., n, m)^T, batched over the leading dimension.
func (c *Backend) Transpose(y, x *engine.Tensor, accumulate bool) {
	n, m := x.Dim(-2), x.Dim(-1)
	batch := x.Size() / max(1, n*m)
	xs, ys := f32(x), f32(y)
	// Rows of the output: batch*m, each gathering one column of x.
	c.parallelRows(batch*m, n, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			b, j := r/m, r%m
			yr := ys[(b*m+j)*n : (b*m+j+1)*n]
			xb := xs[b*n*m:]
			for i := range yr {
				if accumulate {
					yr[i] += xb[i*m+j]
				} else {
					yr[i] = xb[i*m+j]
				}
			}
		}
	})
}

// broadcastAdd: y = x + col[..., i] + row[..., j].
func (c *Backend) broadcastAdd(y, x, col, row *engine.Tensor) {
	M, C := x.Dim(-2), x.Dim(-1)
	xs, ys, cs, rs := f32(x), f32(y), f32(col), f32(row)
	c.parallelRows(x.Rows(), C, func(_, lo, hi int) {
		for r := lo; r < hi; r++ { // r = b*M + i
			b := r / M
			xr, yr := xs[r*C:(r+1)*C], ys[r*C:(r+1)*C]
			var cv float32
			if cs != nil {
				cv = cs[r]
			}
			for j, v := range xr {
				yr[j] = v + cv
			}
			if rs != nil {
				rr := rs[b*C : (b+1)*C]
				for j, v := range rr {
					yr[j] += v
				}
			}
		}
	})
}

// broadcastAddBackward: dx += dy, dcol += row sums of dy, drow += column sums
// of dy per batch element.
func (c *Backend) broadcastAddBackward(dx, dcol, drow, dy *engine.Tensor) {
	M, C := dy.Dim(-2), dy.Dim(-1)
	batch := dy.Size() / max(1, M*C)
	dys, dxs, dcs, drs := f32(dy), f32(dx), f32(dcol), f32(drow)
	if dxs != nil || dcs != nil {
		c.parallelRows(dy.Rows(), C, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				gr := dys[r*C : (r+1)*C]
				var s float32
				for j, g := range gr {
					if dxs != nil {
						dxs[r*C+j] += g
					}
					s += g
				}
				if dcs != nil {
					dcs[r] += s
				}
			}
		})
	}
	if drs != nil {
		c.parallelRows(batch, M*C, func(_, lo, hi int) {
			for b := lo; b < hi; b++ {
				out := drs[b*C : (b+1)*C]
				for i := range M {
					for j, g := range dys[(b*M+i)*C : (b*M+i+1)*C] {
						out[j] += g
					}
				}
			}
		})
	}
}

// prependRow: y[b, 0] = row, y[b, 1:] = x[b].
func (c *Backend) prependRow(y, x, row *engine.Tensor) {
	N1, h := y.Dim(-2), y.Dim(-1)
	if y.Rank() == 2 { // a mask (B, N+1) with a one-element row
		h = 1
		N1 = y.Dim(1)
	}
	B := y.Dim(0)
	xs, ys, rs := f32(x), f32(y), f32(row)
	c.parallelRows(B, N1*h, func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			yb := ys[b*N1*h : (b+1)*N1*h]
			copy(yb[:h], rs)
			copy(yb[h:], xs[b*(N1-1)*h:(b+1)*(N1-1)*h])
		}
	})
}
