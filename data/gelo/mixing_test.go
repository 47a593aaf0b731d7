package gelo

import (
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo/mixing"
)

// An example's A is data/gelo/mixing's draw from the example's mixing stream, bit for bit: the
// sampler has no mixing of its own, so what protocol/overhead and protocol/equality draw with the
// same stream and library is the A the attacks are trained and scored on.
func TestExampleAIsTheMixingDefinition(t *testing.T) {
	c := testCorpus(t, 60, 20, 40, 32, 3)
	for _, mix := range []MixKind{MixOrthogonal, MixNonOrthogonal} {
		cfg := DefaultConfig()
		cfg.Positives = Fixed(3)
		cfg.TokensPerText = Fixed(8)
		cfg.Mix = mix
		if mix == MixNonOrthogonal {
			cfg.MixCond = Fixed(50)
		}
		s := newSampler(t, c, cfg)
		for index := int64(0); index < 3; index++ {
			ex, err := s.Example(data.Train, index)
			if err != nil {
				t.Fatal(err)
			}
			n := ex.N
			want := make([]float32, n*n)
			var mx mixing.Mixer
			rng := stream(cfg.callSeed(), data.Train, index, stageMix)
			if mix == MixNonOrthogonal {
				mx.Conditioned(rng, n, ex.Kappa, want)
			} else {
				mx.Orthogonal(rng, n, want)
			}
			if !slices.Equal(ex.A, want) {
				t.Fatalf("%v example %d: A is not mixing's draw from its stream", mix, index)
			}
		}
	}
}
