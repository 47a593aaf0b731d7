package gelo

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/data"
)

// stage names one step of example generation. Each step reads its own ChaCha8 stream, keyed by
// (seed, split, example index, stage), so an example depends on nothing but that key, and a
// change to one step's configuration (say the shield kind) leaves the other steps' draws alone:
// two sweep cells with the same seed see the same texts and the same tokens.
type stage uint64

const (
	stageParams  stage = iota + 1 // per-example draws of p, t, shield frac/scale, kappa
	stageTexts                    // positives and token positions
	stageShields                  // shield rows (and manifold donors)
	stagePerm                     // the row permutation of X
	stageMix                      // the mixing matrix A
	stageObserve                  // which rows of U are observed
)

// stream returns the random stream of one stage of one example: a PCG generator whose 128-bit
// state is the first output of ChaCha8 keyed by (seed, split, index, stage). ChaCha8 makes
// nearby keys independent; PCG then draws the bulk (shield entries, Gaussian matrices) about
// twice as fast as ChaCha8 would.
func stream(seed uint64, split data.Split, index int64, st stage) *rand.Rand {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(split))
	binary.LittleEndian.PutUint64(key[16:], uint64(index))
	binary.LittleEndian.PutUint64(key[24:], uint64(st))
	k := rand.NewChaCha8(key)
	return rand.New(rand.NewPCG(k.Uint64(), k.Uint64()))
}

// callSeed is the seed of the per-call streams (shields, mix, observe): the config's seed, or, for
// Call > 0, a seed derived from both, so that each call of one example draws its own shields and A.
func (c Config) callSeed() uint64 {
	if c.Call == 0 {
		return c.Seed
	}
	x := c.Seed ^ (c.Call * 0x9e3779b97f4a7c15)
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// gammaVariate draws Gamma(shape a >= 1, scale 1) by Marsaglia and Tsang's squeeze method.
func gammaVariate(rng *rand.Rand, a float64) float64 {
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// studentT draws Student-t(df), df > 2: Z / sqrt(V/df) with V ~ chi^2(df) = 2 Gamma(df/2).
func studentT(rng *rand.Rand, df float64) float64 {
	z := rng.NormFloat64()
	v := 2 * gammaVariate(rng, df/2)
	return z / math.Sqrt(v/df)
}
