// Package workpool runs independent pieces of work on a few goroutines that take them in order
// from a shared counter, so that uneven pieces (texts of different lengths, a core slowed by other
// load) balance out. The host forward passes (models/bert, models/llama) share it.
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

// Chunks runs fn over [0, n) in contiguous blocks of about 4 per worker and at least minChunk
// items, taken dynamically by Jobs; below minChunk items (or with one worker) fn(0, n) runs inline.
func Chunks(workers, n, minChunk int, fn func(lo, hi int)) {
	if workers <= 1 || n <= minChunk {
		fn(0, n)
		return
	}
	chunk := max((n+4*workers-1)/(4*workers), minChunk)
	Jobs(workers, (n+chunk-1)/chunk, func(_, c int) {
		fn(c*chunk, min((c+1)*chunk, n))
	})
}
