//go:build !amd64

package cpu

// Off amd64 hasAVX2 is false and tile6x16AVX2 is never called: the attention kernels use BLAS.
func tile6x16AVX2(c *float32, ldc int, a *float32, ars, aps int, b *float32, ldb, k, nblk int, alpha float32, acc bool) {
}

// hasAVX512 is false off amd64 (a variable so that tests may set it as on amd64).
var hasAVX512 = false

func tile6x16AVX512(c *float32, ldc int, a *float32, ars, aps int, b *float32, ldb, k, nblk int, alpha float32, acc bool) {
}
