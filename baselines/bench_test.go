package baselines

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// BSS benchmarks on Laplace sources with T = 4096 samples, as in the shield table (which runs n = 256).
func benchBSS(b *testing.B, n int, run func(context.Context, *rand.Rand, int) error) {
	b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
		for b.Loop() {
			if err := run(context.Background(), rand.New(rand.NewPCG(1, 1)), n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkFastICA(b *testing.B) {
	for _, n := range []int{64, 128} {
		benchBSS(b, n, func(ctx context.Context, rng *rand.Rand, n int) error {
			_, err := FastICA(ctx, mix(rng, laplaceSources(rng, n, 4096)), FastICAOptions{Seed: 1})
			return err
		})
	}
}

func BenchmarkJADE(b *testing.B) {
	for _, n := range []int{32, 64} {
		benchBSS(b, n, func(ctx context.Context, rng *rand.Rand, n int) error {
			_, err := JADE(ctx, mix(rng, laplaceSources(rng, n, 4096)), JADEOptions{})
			return err
		})
	}
}

// BenchmarkRowSpace is one example of the row-space table at paper size: U_obs (282, 4096) and
// 16 candidate texts of 256 rows.
func BenchmarkRowSpace(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	const n, d = 282, 4096
	u := randDenseT(rng, n, d)
	cands := make([]*mat.Dense, 16)
	for i := range cands {
		cands[i] = randDenseT(rng, 256, d)
	}
	for b.Loop() {
		if _, err := ScoreCandidates(u, cands, BestRow, 0); err != nil {
			b.Fatal(err)
		}
	}
}
