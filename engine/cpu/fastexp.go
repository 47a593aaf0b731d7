package cpu

import "math"

// expf is exp(x) in float32 to within 1e-7 relative, several times faster
// than float32(math.Exp(float64(x))) and small enough to inline: it is
// called for every attention probability and every SiLU. With n the integer
// nearest x/ln2 (rounded by adding 1.5*2^23, which leaves n in the low
// mantissa bits) and r = x - n ln2 (ln2 split in two so that n*ln2hi is
// exact), exp(x) = 2^n exp(r), |r| <= ln2/2, and exp(r) = 1 + r + r^2 P(r)
// with the degree-5 minimax polynomial P of Cephes' expf.
func expf(x float32) float32 {
	if !(x >= -87.33654 && x <= 88.37626) { // also NaN
		return expEdge(x)
	}
	t := x*1.44269504088896341 + 12582912
	n := t - 12582912
	r := x - n*0.693359375 + n*2.12194440e-4
	p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(math.Float32bits(t))-0x4B400000+127)<<23)
}

// expEdge is exp outside expf's fast range: 0 below the smallest normal
// float32 result, +Inf above the largest, exact in the narrow band between
// 2^127 and the overflow threshold, NaN for NaN.
func expEdge(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < -87.33654:
		return 0
	case x > 88.72283:
		return float32(math.Inf(1))
	}
	return float32(math.Exp(float64(x)))
}

// expAffine sets dst[i] = exp(a*src[i] + b) and returns the sum of dst;
// dst may alias src. It is the exponential of every softmax and SiLU: on
// amd64 with AVX2 and FMA eight lanes at a time (expAffineAVX2, the same
// method as expf, within an ulp or two of it), else expAffineGo.
func expAffine(dst, src []float32, a, b float32) float32 {
	src = src[:len(dst)]
	var sum float32
	i := 0
	if hasAVX2 {
		for len(dst)-i >= 8 {
			done, s := expAffineAVX2(&dst[i], &src[i], len(dst)-i, a, b)
			i += done
			sum += s
			if len(dst)-i < 8 {
				break
			}
			// A block with a lane that overflows or is NaN: do it here.
			sum += expAffineGo(dst[i:i+8], src[i:i+8], a, b)
			i += 8
		}
	}
	return sum + expAffineGo(dst[i:], src[i:], a, b)
}

// expAffineGo is expAffine in Go: expf's body written out in a loop (expf
// is too large to inline).
func expAffineGo(dst, src []float32, a, b float32) float32 {
	src = src[:len(dst)]
	var sum float32
	for i, v := range src {
		x := a*v + b
		if !(x >= -87.33654 && x <= 88.37626) {
			e := expEdge(x)
			dst[i] = e
			sum += e
			continue
		}
		t := x*1.44269504088896341 + 12582912
		n := t - 12582912
		r := x - n*0.693359375 + n*2.12194440e-4
		p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
		p = p*r*r + r + 1
		e := p * math.Float32frombits(uint32(int32(math.Float32bits(t))-0x4B400000+127)<<23)
		dst[i] = e
		sum += e
	}
	return sum
}
