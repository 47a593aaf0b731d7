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
	s := NewInitStream(seed, std)
	for _, t := range cfg.Tensors(cfg.Layers) {
		x, err := m.Storage(t.Part, t.Block)
		if err != nil {
			return nil, err
		}
		if t.Part.Gain() {
			s.Gain(x)
		} else {
			s.Normal(x)
		}
	}
	return m, nil
}

// InitStream is the seeded stream of Random's draws, for writers that generate a checkpoint
// tensor by tensor without holding the model: drawing the tensors in Random's order with Normal
// and Gain gives Random's values bit for bit.
type InitStream struct {
	rng *rand.Rand
	std float64
}

// NewInitStream starts the stream Random(cfg, seed, std, lib) draws from.
func NewInitStream(seed uint64, std float64) *InitStream {
	return &InitStream{rng: rand.New(rand.NewPCG(seed, 0x6c6c616d61)), std: std} // "llama"
}

// Normal fills x with N(0, std^2) draws (matrices and biases).
func (s *InitStream) Normal(x []float32) {
	for i := range x {
		x[i] = float32(s.rng.NormFloat64() * s.std)
	}
}

// Gain fills x with 1 + N(0, 0.1^2) draws (RMSNorm gains).
func (s *InitStream) Gain(x []float32) {
	for i := range x {
		x[i] = float32(1 + 0.1*s.rng.NormFloat64())
	}
}
