// Package taskstest holds the small stores and samplers that the tests of the tasks and of the
// training loop share, so both run their unmix task on the same data.
package taskstest

import (
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// UnmixD is the row width of UnmixCorpus.
const UnmixD = 16

// UnmixCorpus is texts texts of 10 to 14 Gaussian rows of width UnmixD around a common offset
// (so that centring matters), with text ids from 500.
func UnmixCorpus(t testing.TB, texts int) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	c := data.NewMemCorpus(UnmixD, 1)
	offset := make([]float32, UnmixD)
	for j := range offset {
		offset[j] = float32(2 * rng.NormFloat64())
	}
	for i := 0; i < texts; i++ {
		rows := make([]float32, (10+rng.IntN(5))*UnmixD)
		for j := range rows {
			rows[j] = offset[j%UnmixD] + float32(rng.NormFloat64())
		}
		if err := c.Add(int64(500+i), rows, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// UnmixSampler gives sets of 2 positives x 4 window rows plus 2 gaussian shields (n = 10), 30% of
// the texts in the validation split, centred when center is set.
func UnmixSampler(t testing.TB, c data.Corpus, center bool) *gelo.Sampler {
	t.Helper()
	cfg := gelo.DefaultConfig()
	cfg.Seed, cfg.ValFrac, cfg.Center = 3, 0.3, center
	cfg.Positives, cfg.TokensPerText, cfg.ShieldRows = gelo.Fixed(2), gelo.Fixed(4), 2
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
