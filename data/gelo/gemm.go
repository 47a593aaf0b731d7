package gelo

import "github.com/gelo-research/geloattack/engine/blas"

// matmul sets c = a b for row-major a: (m, k), b: (k, n), c: (m, n). Every float32 product of
// the sampler goes through here, so the GEMM behind it can be switched in one place.
func matmul(m, n, k int, a, b, c []float32) {
	blas.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
}
