package engine_test

import (
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// Straightforward float64 references of every op, written from the
// definitions without any of the kernels' tricks.

func refLinear(x, w []float64, M, in, out int) []float64 {
	y := make([]float64, M*out)
	for i := range M {
		for o := range out {
			var s float64
			for p := range in {
				s += x[i*in+p] * w[o*in+p]
			}
			y[i*out+o] = s
		}
	}
	return y
}

func refRMSNorm(x, w []float64, h int, eps float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x)/h; r++ {
		var ss float64
		for j := range h {
			ss += x[r*h+j] * x[r*h+j]
		}
		inv := 1 / math.Sqrt(ss/float64(h)+eps)
		for j := range h {
			y[r*h+j] = x[r*h+j] * inv * w[j]
		}
	}
	return y
}

func refAttention(q, k, v, mask []float64, B, Nq, Nk, h, heads int) []float64 {
	dh := h / heads
	o := make([]float64, B*Nq*h)
	for b := range B {
		for j := range heads {
			for i := range Nq {
				sc := make([]float64, Nk)
				mx := math.Inf(-1)
				for t := range Nk {
					if mask != nil && mask[b*Nk+t] < 0.5 {
						continue
					}
					var s float64
					for c := range dh {
						s += q[(b*Nq+i)*h+j*dh+c] * k[(b*Nk+t)*h+j*dh+c]
					}
					sc[t] = s / math.Sqrt(float64(dh))
					mx = math.Max(mx, sc[t])
				}
				if math.IsInf(mx, -1) {
					continue
				}
				var z float64
				p := make([]float64, Nk)
				for t := range Nk {
					if mask != nil && mask[b*Nk+t] < 0.5 {
						continue
					}
					p[t] = math.Exp(sc[t] - mx)
					z += p[t]
				}
				for t := range Nk {
					for c := range dh {
						o[(b*Nq+i)*h+j*dh+c] += p[t] / z * v[(b*Nk+t)*h+j*dh+c]
					}
				}
			}
		}
	}
	return o
}

func refMap(x []float64, f func(float64) float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = f(v)
	}
	return y
}

func refZip(a, b []float64, f func(x, y float64) float64) []float64 {
	y := make([]float64, len(a))
	for i := range a {
		bv := b[0]
		if len(b) == len(a) {
			bv = b[i]
		}
		y[i] = f(a[i], bv)
	}
	return y
}

func refSilu(g float64) float64 { return g / (1 + math.Exp(-g)) }

func refL2Normalize(x []float64, e int) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x)/e; r++ {
		var ss float64
		for j := range e {
			ss += x[r*e+j] * x[r*e+j]
		}
		n := math.Max(math.Sqrt(ss), engine.L2NormEps)
		for j := range e {
			y[r*e+j] = x[r*e+j] / n
		}
	}
	return y
}

func refRowNorm(x []float64, e int) []float64 {
	y := make([]float64, len(x)/e)
	for r := range y {
		for j := range e {
			y[r] += x[r*e+j] * x[r*e+j]
		}
		y[r] = math.Sqrt(y[r])
	}
	return y
}

func refLSE(x []float64, mask []float64) float64 {
	mx := math.Inf(-1)
	for j, v := range x {
		if mask == nil || mask[j] > 0.5 {
			mx = math.Max(mx, v)
		}
	}
	var s float64
	for j, v := range x {
		if mask == nil || mask[j] > 0.5 {
			s += math.Exp(v - mx)
		}
	}
	return mx + math.Log(s)
}

func refMatMul(a, b []float64, batch, n, k, m int, tA, tB bool) []float64 {
	c := make([]float64, batch*n*m)
	for bi := range batch {
		for i := range n {
			for j := range m {
				var s float64
				for p := range k {
					var av, bv float64
					if tA {
						av = a[bi*n*k+p*n+i]
					} else {
						av = a[bi*n*k+i*k+p]
					}
					if tB {
						bv = b[bi*k*m+j*k+p]
					} else {
						bv = b[bi*k*m+p*m+j]
					}
					s += av * bv
				}
				c[bi*n*m+i*m+j] = s
			}
		}
	}
	return c
}

func refTranspose(x []float64, batch, n, m int) []float64 {
	y := make([]float64, len(x))
	for b := range batch {
		for i := range n {
			for j := range m {
				y[b*n*m+j*n+i] = x[b*n*m+i*m+j]
			}
		}
	}
	return y
}

func refInfoNCE(s, pos []float64, B, C int) float64 {
	var tot float64
	for b := range B {
		tot += refLSE(s[b*C:(b+1)*C], nil) - refLSE(s[b*C:(b+1)*C], pos[b*C:(b+1)*C])
	}
	return tot / float64(B)
}

func refSum(x []float64, f func(float64) float64) []float64 {
	var s float64
	for _, v := range x {
		s += f(v)
	}
	return []float64{s}
}
