// Package sample holds the one way geloattack draws k distinct indices, shared by the sampler, the
// metrics and the tasks so that every seeded stream consumes its random numbers identically.
package sample

import "math/rand/v2"

// Distinct returns k distinct integers of [0, n), k <= n, in random order: Floyd's algorithm (k
// draws, no O(n) memory), then a shuffle so the order carries no information.
func Distinct(rng *rand.Rand, n, k int) []int {
	out := make([]int, 0, k)
	seen := make(map[int]struct{}, k)
	for j := n - k; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, dup := seen[t]; dup {
			t = j
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}
