package cpu

import "github.com/gelo-research/geloattack/engine"

// Gemm is the batched row-major GEMM (see engine.Backend.Gemm). BLAS runs
// single-threaded; parallelism is the workers': a batch of small products
// is spread over them product by product, a large product is split into
// blocks of rows of C, one per worker. Every element of C is then computed
// by one sequential BLAS call whatever the scheduling, so results are
// reproducible.
func (c *Backend) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, b *engine.Tensor, beta float32, cc *engine.Tensor) {
	as, bs, cs := f32(a), f32(b), f32(cc)
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	sa, sb, sc := m*k, k*n, m*n
	// Below 16*minWork (2^18 by default) multiply-adds a product is not
	// split: a split costs a hand-off and repacks B per worker.
	if batch >= 2*c.workers || m*n*k < 16*c.minWork {
		c.parallelRows(batch, m*n*k, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				c.lib.Sgemm(transA, transB, m, n, k, alpha, as[i*sa:(i+1)*sa], lda, bs[i*sb:(i+1)*sb], ldb, beta, cs[i*sc:(i+1)*sc], n)
			}
		})
		return
	}
	for i := range batch {
		ai, bi, ci := as[i*sa:(i+1)*sa], bs[i*sb:(i+1)*sb], cs[i*sc:(i+1)*sc]
		c.parallelRows(m, n*k, func(_, lo, hi int) {
			aoff := lo * lda // rows lo..hi of op(A): rows of A, or its columns when transposed
			if transA {
				aoff = lo
			}
			c.lib.Sgemm(transA, transB, hi-lo, n, k, alpha, ai[aoff:], lda, bi, ldb, beta, ci[lo*n:], n)
		})
	}
}
