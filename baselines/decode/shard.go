package decode

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is one of Count disjoint parts of a decode's batches, for a cluster's job array: batch b
// is shard b mod Count's. Interleaved rather than contiguous ranges, so that every shard's
// batches are spread over the run (a shard's ETA is the run's) and adding batches to a plan
// leaves each earlier batch in its shard. Merge joins the shards' output directories.
type Shard struct {
	Index, Count int
}

// AllBatches is the shard of an unsharded run.
var AllBatches = Shard{Index: 0, Count: 1}

// String writes "i/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Owns reports whether batch b is the shard's.
func (s Shard) Owns(b int64) bool { return b%int64(s.Count) == int64(s.Index) }

// Batches is how many of batches 0..total-1 the shard owns.
func (s Shard) Batches(total int) int {
	if s.Index >= total {
		return 0
	}
	return (total - s.Index + s.Count - 1) / s.Count
}

// ParseShard reads "i/N" (0 <= i < N).
func ParseShard(v string) (Shard, error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want i/N with 0 <= i < N, e.g. 0/4", v)
	}
	return Shard{Index: i, Count: n}, nil
}
