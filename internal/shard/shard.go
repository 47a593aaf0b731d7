// Package shard splits numbered work (a sweep's cells, a decode's or an assessment's batches)
// into N interleaved parts for a cluster's job array: item i belongs to shard i mod N. Interleaved
// rather than contiguous, so every shard gets cheap and expensive items alike (its ETA is the
// run's) and adding items to a plan leaves each earlier item in its shard. One type, so that
// sweep, decode and assess parse and own items by the same rule.
package shard

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is part Index of Count (0 <= Index < Count). The zero value is not valid: use All.
type Shard struct {
	Index, Count int
}

// All is the shard of an unsharded run: every item.
func All() Shard { return Shard{Index: 0, Count: 1} }

// String writes "i/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Owns reports whether item i (0-based) is the shard's.
func (s Shard) Owns(i int) bool { return i%s.Count == s.Index }

// Items is how many of items 0..total-1 the shard owns.
func (s Shard) Items(total int) int {
	if s.Index >= total {
		return 0
	}
	return (total - s.Index + s.Count - 1) / s.Count
}

// Validate refuses a shard outside 0 <= Index < Count.
func (s Shard) Validate() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard %d/%d: want i/N with 0 <= i < N", s.Index, s.Count)
	}
	return nil
}

// Parse reads "i/N" (0 <= i < N).
func Parse(v string) (Shard, error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	s := Shard{Index: i, Count: n}
	if !ok || err1 != nil || err2 != nil || s.Validate() != nil {
		return Shard{}, fmt.Errorf("shard %q: want i/N with 0 <= i < N, e.g. 0/4", v)
	}
	return s, nil
}
