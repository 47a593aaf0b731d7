package blas

import (
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gonum returns the pure-Go fallback (gonum.org/v1/gonum/blas/gonum), which is
// always available and parallelises large products over GOMAXPROCS itself.
func Gonum() *Library {
	var impl gonum.Implementation
	return &Library{
		name: "gonum (pure Go)",
		sgemm: func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
			impl.Sgemm(trans(transA), trans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		},
	}
}

func trans(t bool) gblas.Transpose {
	if t {
		return gblas.Trans
	}
	return gblas.NoTrans
}
