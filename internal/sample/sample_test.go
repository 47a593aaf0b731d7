package sample

import (
	"math/rand/v2"
	"testing"
)

func TestDistinctIsUniformAndDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, k, trials = 10, 3, 30000
	var hits [n]int
	for i := 0; i < trials; i++ {
		got := Distinct(rng, n, k)
		if len(got) != k {
			t.Fatalf("len %d, want %d", len(got), k)
		}
		seen := map[int]bool{}
		for _, v := range got {
			if v < 0 || v >= n || seen[v] {
				t.Fatalf("bad draw %v", got)
			}
			seen[v] = true
			hits[v]++
		}
	}
	// Each index is chosen with probability k/n: 9000 expected, sd ~ 79.
	for v, h := range hits {
		if h < 8600 || h > 9400 {
			t.Fatalf("index %d chosen %d times, want about 9000", v, h)
		}
	}
	if got := Distinct(rng, 5, 5); len(got) != 5 {
		t.Fatalf("k = n gives %v", got)
	}
}
