package workpool

import (
	"maps"
	"sync"
	"sync/atomic"
	"testing"
)

// Every job runs exactly once, each chunk is contiguous and the chunks tile [0, n), for one and
// several workers.
func TestEveryItemOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 7} {
		for _, n := range []int{0, 1, 31, 32, 33, 1000} {
			seen := make([]atomic.Int32, n)
			Jobs(workers, n, func(w, j int) {
				if w < 0 || w >= max(workers, 1) {
					t.Errorf("worker %d of %d", w, workers)
				}
				seen[j].Add(1)
			})
			covered := make([]atomic.Int32, n)
			Chunks(workers, n, 32, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					covered[i].Add(1)
				}
			})
			for i := range seen {
				if seen[i].Load() != 1 || covered[i].Load() != 1 {
					t.Fatalf("workers %d, n %d: item %d run %d times by Jobs, %d by Chunks", workers, n, i, seen[i].Load(), covered[i].Load())
				}
			}
		}
	}
}

// Chunks cuts a range into the same blocks whatever the worker count (a per-block GEMM then
// computes every element with the same call), about Pieces of them, none below minChunk.
func TestChunksIndependentOfWorkers(t *testing.T) {
	for _, n := range []int{1, 31, 33, 100, 1000, 22016} {
		var want map[[2]int]bool
		for _, workers := range []int{1, 2, 3, 5, 16, 64} {
			var mu sync.Mutex
			got := map[[2]int]bool{}
			Chunks(workers, n, 32, func(lo, hi int) {
				mu.Lock()
				got[[2]int{lo, hi}] = true
				mu.Unlock()
			})
			if want == nil {
				want = got
				if n > 32*Pieces && len(got) != Pieces {
					t.Errorf("n %d: %d blocks, want %d", n, len(got), Pieces)
				}
				for b := range got {
					if b[1]-b[0] < 32 && b[1] != n {
						t.Errorf("n %d: block %v below the minimum 32", n, b)
					}
				}
				continue
			}
			if !maps.Equal(got, want) {
				t.Fatalf("n %d: blocks on %d workers %v, on 1 worker %v", n, workers, got, want)
			}
		}
	}
}
