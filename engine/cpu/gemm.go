package cpu

import (
	"math/bits"

	"github.com/gelo-research/geloattack/engine"
)

// Gemm is the batched row-major GEMM (see engine.Backend.Gemm). BLAS runs
// single-threaded; parallelism is the workers', over tiles of C that
// gemmTiles cuts from each product's shape alone. Every element of C is
// computed by one sequential BLAS call whose shape does not depend on the
// worker count or the scheduling, so results are the same bits on 1 or 16
// workers.
func (c *Backend) Gemm(transA, transB bool, batch, m, n, k int, alpha float32, a, b *engine.Tensor, beta float32, cc *engine.Tensor) {
	c.GemmStrided(transA, transB, batch, m, n, k, alpha, a, m*k, b, k*n, beta, cc, m*n)
}

// GemmStrided is Gemm with explicit strides between the batch's matrices
// (see engine.Backend.GemmStrided); a zero stride shares one matrix. Each
// product is tiled by its own shape, and the batch's tiles are the tasks of
// one parallel section, so a product gives the same bits whether it is made
// alone or in a strided batch.
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
	tiles, byCols := gemmTiles(m, n, k, c.minWork)
	c.parallelRows(batch*tiles, max(1, m*n*k/tiles), func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			i, j := t/tiles, t%tiles
			ai, bi, ci := mat(as, i, sa, m*k), mat(bs, i, sb, k*n), mat(cs, i, sc, m*n)
			if byCols { // columns lo..hi of C from columns of op(B): columns of B, or its rows when transposed
				lo, hi := tileBounds(n, tiles, j)
				boff := lo
				if transB {
					boff = lo * ldb
				}
				c.sgemm(transA, transB, m, hi-lo, k, alpha, ai, lda, bi[boff:], ldb, beta, ci[lo:], n)
				continue
			}
			// rows lo..hi of C from rows of op(A): rows of A, or its columns when transposed
			lo, hi := tileBounds(m, tiles, j)
			aoff := lo * lda
			if transA {
				aoff = lo
			}
			c.sgemm(transA, transB, hi-lo, n, k, alpha, ai[aoff:], lda, bi, ldb, beta, ci[lo*n:], n)
		}
	})
}

// gemmTiles is how many tiles of C a product (m, n, k) is cut into, and whether they are blocks
// of columns (else of rows), from its shape alone; minWork is the backend's work threshold.
//
// A product under 16*minWork multiply-adds (2^18 by default) is one tile: a split costs a
// hand-off and a repacking. Larger ones are cut along C's longer side into a power of two of
// tiles (even on 1, 2, 4, 8 or 16 workers), at least 2, at most 16, each at least gemmMinTile
// wide. Each tile's BLAS call packs the whole of the other operand again (a row tile all of
// op(B), k x n), which costs as much as some 25-60 rows of multiply-adds, so narrow tiles cost
// CPU time: on 2 workers (CPU ms, best of 4, OpenBLAS SkylakeX, shared machine) the paper step's
// three 384 x 384 weight gradients (k 4112) took 37, 48, 59 and 74 ms at 2, 4, 8 and 16 tiles,
// the language model's (512, 384, 32000) 117, 140, 190 and 260 ms, and its (4112, 1536, 384)
// forward 40 ms at 2 tiles and 44 at 4 to 16. The same 1024 as models/llama's column tiles.
func gemmTiles(m, n, k, minWork int) (tiles int, byCols bool) {
	if m*n*k < 16*minWork || max(m, n) < 2 {
		return 1, false
	}
	byCols = n > m
	long := max(m, n)
	tiles = 1 << (bits.Len(uint(max(long/gemmMinTile, 1))) - 1) // the power of two at or below long/gemmMinTile
	return min(max(tiles, 2), 16), byCols
}

// gemmMinTile is the narrowest tile gemmTiles cuts when a side has room for more than two.
const gemmMinTile = 1024

// tileBounds is tile j of n items cut into tiles, its bounds rounded down to multiples of 16
// (whole blocks of BLAS micro-kernels) where the tiles are wide enough, the last ending at n.
func tileBounds(n, tiles, j int) (lo, hi int) {
	at := func(i int) int {
		if i == tiles {
			return n
		}
		b := i * n / tiles
		if n/tiles >= 64 {
			b &^= 15
		}
		return b
	}
	return at(j), at(j + 1)
}

// sgemm is the one door of the kernels to BLAS: it counts the product's 2·m·n·k floating-point
// operations (GemmFLOPs) and runs it single-threaded on the calling worker.
func (c *Backend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	c.flops.Add(2 * int64(m) * int64(n) * int64(k))
	c.lib.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// GemmFLOPs is the running total of 2·m·n·k over every BLAS product the backend has run since it
// was opened (engine.FLOPCounter): Gemm's tiles and the attention kernels' per-head products, over
// the real keys only where a mask drops some, so benchmarks can divide a step's share by its time.
func (c *Backend) GemmFLOPs() int64 { return c.flops.Load() }
