//go:build !amd64

package cpu

// hasAVX2 is false off amd64: expAffine and the vec loops use their Go loops. A variable, as on
// amd64, so that tests can switch the vector loops off wherever they run.
var hasAVX2 = false

// expAffineAVX2 is never called off amd64.
func expAffineAVX2(dst, src *float32, n int, a, b float32) (done int, sum float32) {
	return 0, 0
}
