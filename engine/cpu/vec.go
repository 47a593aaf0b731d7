package cpu

import "math"

// The elementwise loops of the step's non-GEMM kernels, each in two forms that give the same
// bits: eight lanes at a time in vec_amd64.s where the CPU has AVX2 (whole blocks of eight),
// and the Go loop, which does the rest (the tail, or everything elsewhere). Vectorising changes
// no result: each element sees the same IEEE operations in the same order, and nothing is
// summed across elements.

// vecLen is how many of n elements the AVX2 loops take: whole blocks of eight; 0 without AVX2.
func vecLen(n int) int {
	if !hasAVX2 {
		return 0
	}
	return n &^ 7
}

// swigluForward sets y[i] = g[i] / (1 + y[i]) * u[i], where y holds exp(-g): SiLU(g) * u.
func swigluForward(y, g, u []float32) {
	g, u = g[:len(y)], u[:len(y)]
	i := vecLen(len(y))
	if i > 0 {
		swigluForwardAVX2(&y[0], &g[0], &u[0], i)
	}
	for ; i < len(y); i++ {
		y[i] = g[i] / (1 + y[i]) * u[i]
	}
}

// swigluBackward is SwiGLU's gradient where both inputs need one: with s = 1/(1+e), e = exp(-g),
// dg (+)= dy u s (1 + g (1 - s)) and du (+)= dy g s, accumulating where acc says so.
func swigluBackward(dg, du, dy, g, u, e []float32, accGate, accUp bool) {
	n := len(e)
	dg, du, dy, g, u = dg[:n], du[:n], dy[:n], g[:n], u[:n]
	i := vecLen(n)
	if i > 0 {
		swigluBackwardAVX2(&dg[0], &du[0], &dy[0], &g[0], &u[0], &e[0], i, accGate, accUp)
	}
	for ; i < n; i++ {
		gi, d := g[i], dy[i]
		s := 1 / (1 + e[i])
		v := d * u[i] * s * (1 + gi*(1-s))
		if accGate {
			v += dg[i]
		}
		dg[i] = v
		w := d * gi * s
		if accUp {
			w += du[i]
		}
		du[i] = w
	}
}

// adamwConsts are one AdamW step's constants, in the order adamwAVX2 loads them.
type adamwConsts struct {
	b1, c1, b2, c2 float32 // the moments' decay rates and 1 minus them
	decay          float32 // 1 - lr * weight decay
	step           float32 // lr / bias correction 1
	invBC2         float32 // 1 / bias correction 2
	eps            float32
}

// adamwUpdate is AdamW's update of one span (see Backend.AdamW): the moments, the parameter, and
// the gradient zeroed.
func adamwUpdate(p, g, m, v []float32, k *adamwConsts) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	i := vecLen(n)
	if i > 0 {
		adamwAVX2(&p[0], &g[0], &m[0], &v[0], i, k)
	}
	for ; i < n; i++ {
		gi := g[i]
		mi := k.b1*m[i] + k.c1*gi
		vi := k.b2*v[i] + k.c2*gi*gi
		m[i], v[i] = mi, vi
		g[i] = 0 // the gradient is consumed (saves ZeroGrad's pass)
		// float32(math.Sqrt(float64(x))) compiles to one SQRTSS, as VSQRTPS rounds.
		p[i] = p[i]*k.decay - k.step*mi/(float32(math.Sqrt(float64(vi*k.invBC2)))+k.eps)
	}
}

// maxOf is the largest element of x as the loop "if v > mx { mx = v }" from -Inf finds it: NaN
// elements are passed over.
func maxOf(x []float32) float32 {
	mx := float32(math.Inf(-1))
	i := vecLen(len(x))
	if i > 0 {
		mx = maxAVX2(&x[0], i)
	}
	for _, v := range x[i:] {
		if v > mx {
			mx = v
		}
	}
	return mx
}

// scaleSlice multiplies every element of x by s.
func scaleSlice(x []float32, s float32) {
	i := vecLen(len(x))
	if i > 0 {
		scaleAVX2(&x[0], i, s)
	}
	for ; i < len(x); i++ {
		x[i] *= s
	}
}

// softmaxGrad sets dp[i] = p[i] * (dp[i] - d) * scale: a softmax row's score gradient from its
// probabilities p, the gradient dp of the probabilities and their dot product d.
func softmaxGrad(dp, p []float32, d, scale float32) {
	p = p[:len(dp)]
	i := vecLen(len(dp))
	if i > 0 {
		softmaxGradAVX2(&dp[0], &p[0], i, d, scale)
	}
	for ; i < len(dp); i++ {
		dp[i] = p[i] * (dp[i] - d) * scale
	}
}

// scaledProduct sets y[i] = x[i] * s * w[i]: RMSNorm's output row from its input, 1/rms and
// the gain.
func scaledProduct(y, x, w []float32, s float32) {
	x, w = x[:len(y)], w[:len(y)]
	i := vecLen(len(y))
	if i > 0 {
		scaledProductAVX2(&y[0], &x[0], &w[0], i, s)
	}
	for ; i < len(y); i++ {
		y[i] = x[i] * s * w[i]
	}
}

// rmsNormGrad adds RMSNorm's input gradient of one row to dx: dx[i] += inv * (dy[i]*w[i] -
// x[i]*inv*dot), with inv = 1/rms and dot = mean(dy * w * x * inv).
func rmsNormGrad(dx, dy, x, w []float32, inv, dot float32) {
	dy, x, w = dy[:len(dx)], x[:len(dx)], w[:len(dx)]
	i := vecLen(len(dx))
	if i > 0 {
		rmsNormGradAVX2(&dx[0], &dy[0], &x[0], &w[0], i, inv, dot)
	}
	for ; i < len(dx); i++ {
		dx[i] += inv * (dy[i]*w[i] - x[i]*inv*dot)
	}
}

// accScaledProduct adds a[i] * b[i] * s to acc[i]: one row's share of RMSNorm's gain gradient.
func accScaledProduct(acc, a, b []float32, s float32) {
	a, b = a[:len(acc)], b[:len(acc)]
	i := vecLen(len(acc))
	if i > 0 {
		accScaledProductAVX2(&acc[0], &a[0], &b[0], i, s)
	}
	for ; i < len(acc); i++ {
		acc[i] += a[i] * b[i] * s
	}
}
