package extraction

import "github.com/gelo-research/geloattack/internal/workpool"

// parallel runs fn over [0, n) in chunks of at least 32 on up to workers goroutines (as
// models/bert's forward pass does).
func parallel(workers, n int, fn func(lo, hi int)) { workpool.Chunks(workers, n, 32, fn) }
