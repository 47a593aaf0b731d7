package overhead

import (
	"math/rand/v2"

	"github.com/gelo-research/geloattack/data/gelo/mixing"
	"github.com/gelo-research/geloattack/engine/blas"
)

// generator draws the secret matrices of one n on the trusted side with data/gelo/mixing, the
// one definition of GELO's A that the example sampler draws with too, on the library the bench
// measures. It is not safe for concurrent use.
type generator struct {
	mx mixing.Mixer
	n  int
}

func newGenerator(lib *blas.Library, n int) *generator {
	return &generator{mx: mixing.Mixer{Lib: lib}, n: n}
}

// orthogonal draws a Haar A into a: (n, n) row-major float32. Its inverse is A^T.
func (g *generator) orthogonal(rng *rand.Rand, a []float32) error {
	g.mx.Orthogonal(rng, g.n, a)
	return nil
}

// kappa draws a conditioned A (cond(A) = kappa) into a and its inverse into ainv (both (n, n)
// row-major float32). The inverse comes from the draw's factors (mixing.Mixer.Inverse): the
// trusted side that drew A knows them.
func (g *generator) kappa(rng *rand.Rand, kappa float64, a, ainv []float32) error {
	g.mx.Conditioned(rng, g.n, kappa, a)
	return g.mx.Inverse(ainv)
}
