package llama

import (
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine/blas"
)

// Random returns a model of cfg with weights drawn from a stream seeded by seed: every matrix and
// bias entry N(0, std^2) (Hugging Face initialises with initializer_range, 0.02 for these
// families), every RMSNorm gain 1 + N(0, 0.1^2) rather than exactly 1, so that a forward pass
// that confused two gains would show it. Draws run in a fixed order (embedding, then each block
// in Hugging Face's tensor order, final norm, output projection), so the same seed gives the same
// model bit for bit.
func Random(cfg Config, seed uint64, std float64, lib *blas.Library) (*Model, error) {
	m, err := New(cfg, lib)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6c616d61)) // "llama"
	normal := func(x []float32, s float64) {
		for i := range x {
			x[i] = float32(rng.NormFloat64() * s)
		}
	}
	gain := func(x []float32) {
		for i := range x {
			x[i] = float32(1 + 0.1*rng.NormFloat64())
		}
	}
	normal(m.Embed, std)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		gain(b.AttnNorm)
		normal(b.QKV, std)
		if b.QKVBias != nil {
			normal(b.QKVBias, std)
		}
		if b.QNorm != nil {
			gain(b.QNorm)
			gain(b.KNorm)
		}
		normal(b.O, std)
		gain(b.MLPNorm)
		normal(b.GateUp, std)
		normal(b.Down, std)
	}
	gain(m.Norm)
	if !cfg.TiedEmbeddings {
		normal(m.LMHead, std)
	}
	return m, nil
}
