package settransformer

import (
	"math"
	"math/rand/v2"
)

// gaussian fills n values from rng.
func gaussian(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// SyntheticBatch draws a retrieval batch of b sets of n rows from seed: Gaussian rows (any content
// does where only the cost of a step matters), two positives per set among 2b candidates. The
// step benchmarks (models/settransformer/stepbench) and the model's tests train on it.
func SyntheticBatch(cfg Config, b, n int, seed uint64) (Batch, Targets) {
	rng := rand.New(rand.NewPCG(seed, 0xbe4c))
	u := gaussian(rng, b*n*cfg.InputDim)
	cand := gaussian(rng, 2*b*cfg.CandidateDim)
	pos := make([][]int, b)
	for i := range pos {
		pos[i] = []int{2 * i, 2*i + 1}
	}
	return Batch{B: b, N: n, U: u}, Targets{Candidates: cand, Positives: pos}
}

// SyntheticUnmixBatch draws an unmix batch of b sets of n rows from seed: Gaussian U (b, n, d)
// and 3n/4 Gaussian clean rows per set.
func SyntheticUnmixBatch(cfg Config, b, n int, seed uint64) (Batch, UnmixTargets) {
	rng := rand.New(rand.NewPCG(seed, 0x756e6d))
	d, nc := cfg.InputDim, 3*n/4
	u := gaussian(rng, b*n*d)
	t := UnmixTargets{H: gaussian(rng, b*nc*d), CleanRows: make([]int, b), MeanNorm: make([]float32, b)}
	for i := range t.CleanRows {
		t.CleanRows[i], t.MeanNorm[i] = nc, float32(math.Sqrt(float64(d)))
	}
	return Batch{B: b, N: n, U: u}, t
}
