package berttest

import "math"

// MaxDiff is the largest |a_i - b_i| over the shorter of a and b.
func MaxDiff(a, b []float32) float64 {
	var d float64
	for i := range min(len(a), len(b)) {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// Dot is a . b in float64 (a cosine, for unit-norm embeddings).
func Dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
