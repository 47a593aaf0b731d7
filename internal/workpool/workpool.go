// Package workpool runs independent pieces of work on a few goroutines that take them in order
// from a shared counter, so that uneven pieces (texts of different lengths, a core slowed by other
// load) balance out. The host forward passes (models/bert, models/llama) share it, and engine/cpu
// cuts its kernels' rows by ChunkSize on its own pool of workers.
package workpool

import (
	"sync"
	"sync/atomic"
)

// Jobs runs fn(worker, job) for job in [0, n) on up to workers goroutines; worker indexes
// per-worker scratch space. One worker runs them in order on the caller's goroutine.
func Jobs(workers, n int, fn func(worker, job int)) {
	workers = max(min(workers, n), 1)
	if workers == 1 {
		for j := 0; j < n; j++ {
			fn(0, j)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1)) - 1
				if j >= n {
					return
				}
				fn(w, j)
			}
		}()
	}
	wg.Wait()
}

// Chunks runs fn over [0, n) in contiguous blocks taken dynamically by Jobs on up to workers
// goroutines. The blocks are ChunkSize(n, minChunk) items each (the last may be shorter), the
// same for any worker count, so a computation whose result depends on a block's bounds (a GEMM
// call per block, whose kernel path follows its shape) gives the same bits on 1 or 16 workers.
func Chunks(workers, n, minChunk int, fn func(lo, hi int)) {
	if n <= minChunk {
		fn(0, n) // one block, whatever the workers
		return
	}
	chunk := ChunkSize(n, minChunk)
	Jobs(workers, (n+chunk-1)/chunk, func(_, c int) {
		fn(c*chunk, min((c+1)*chunk, n))
	})
}

// Pieces is how many blocks Chunks cuts a range into when minChunk allows: enough for up to
// Pieces workers to balance, few enough that a per-block GEMM keeps its large shapes.
const Pieces = 16

// ChunkSize is the block size Chunks uses for n items: n/Pieces rounded up, at least minChunk.
// It depends on the problem's size only, never on the worker count.
func ChunkSize(n, minChunk int) int { return max((n+Pieces-1)/Pieces, minChunk, 1) }
