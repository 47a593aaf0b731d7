package workpool

import (
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
