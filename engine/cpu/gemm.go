package cpu

import "github.com/gelo-research/geloattack/engine"

// Gemm is the batched row-major GEMM (see engine.Backend.Gemm). BLAS runs
// single-threaded; parallelism is the workers': a batch of small products
// is spread over them product by product, a large product is split into
// blocks of rows of C (a few per worker), and a product with an operand of
// 2^20 floats or more into one block of rows or of columns per worker,
// whichever packs less. Every element of C is then computed
// by one sequential BLAS call whatever the scheduling, so results are
// reproducible.
func (c *Backend) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, b *engine.Tensor, beta float32, cc *engine.Tensor) {
	c.GemmStrided(transA, transB, batch, m, n, k, alpha, a, m*k, b, k*n, beta, cc, m*n)
}

// GemmStrided is Gemm with explicit strides between the batch's matrices
// (see engine.Backend.GemmStrided); a zero stride shares one matrix. The
// scheduling is Gemm's, so a product gives the same bits whether it is
// made alone or in a strided batch.
func (c *Backend) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a *engine.Tensor, sa int, b *engine.Tensor, sb int, beta float32, cc *engine.Tensor, sc int) {
	as, bs, cs := f32(a), f32(b), f32(cc)
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	// matrix i of x with stride st and size sz (a shared matrix when st is 0).
	mat := func(x []float32, i, st, sz int) []float32 { return x[i*st : i*st+sz] }
	// Below 16*minWork (2^18 by default) multiply-adds a product is not
	// split: a split costs a hand-off and repacks B per worker.
	if batch >= 2*c.workers || m*n*k < 16*c.minWork {
		c.parallelRows(batch, m*n*k, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				c.lib.Sgemm(transA, transB, m, n, k, alpha, mat(as, i, sa, m*k), lda, mat(bs, i, sb, k*n), ldb, beta, mat(cs, i, sc, m*n), n)
			}
		})
		return
	}
	// Products whose operands are both under 2^20 floats keep the row blocks of parallelRows
	// (four per worker) they had before: packing is cheap there, and their bits (the
	// quickstart's figures among them) stay as they were. Larger ones get one block of C per
	// worker, split along whichever of C's rows and columns packs less: each block's BLAS call
	// packs its own share of op(A) and op(B), so a row split repacks all of op(B) (k x n) per
	// worker and a column split all of op(A) (m x k). The language model's vocabulary GEMMs
	// ((512, 384) x (384, 32000), say) pack far less that way than in row blocks of four per
	// worker: 1.15x its training step on 2 cores.
	small := k*n < 1<<20 && m*k < 1<<20
	w := min(c.workers, max(m, n))
	byCols := !small && w*m*k+k*n < w*k*n+m*k && n >= w
	for i := range batch {
		ai, bi, ci := mat(as, i, sa, m*k), mat(bs, i, sb, k*n), mat(cs, i, sc, m*n)
		rows := func(lo, hi int) { // rows lo..hi of C
			aoff := lo * lda // rows lo..hi of op(A): rows of A, or its columns when transposed
			if transA {
				aoff = lo
			}
			c.lib.Sgemm(transA, transB, hi-lo, n, k, alpha, ai[aoff:], lda, bi, ldb, beta, ci[lo*n:], n)
		}
		switch {
		case small:
			c.parallelRows(m, n*k, func(_, lo, hi int) { rows(lo, hi) })
		case byCols:
			c.parallelParts(n, w, func(lo, hi int) { // columns lo..hi of C
				boff := lo // columns lo..hi of op(B): columns of B, or its rows when transposed
				if transB {
					boff = lo * ldb
				}
				c.lib.Sgemm(transA, transB, m, hi-lo, k, alpha, ai, lda, bi[boff:], ldb, beta, ci[lo:], n)
			})
		default:
			c.parallelParts(m, w, rows)
		}
	}
}
