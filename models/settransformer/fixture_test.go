package settransformer

import (
	"math/rand/v2"
	"testing"
)

// testConfig is the small model every comparison test uses.
func testConfig() Config {
	return Config{InputDim: 12, CandidateDim: 8, Hidden: 16, Layers: 2, Heads: 2, MLPHidden: 24,
		Eps: DefaultEps, Task: TaskRetrieval, Temperature: DefaultTemperature}
}

// testWeights draws weights larger than the real initialisation (std 0.3, norms around 1) so that
// every term of the backward pass is exercised; values are float32-representable so the engine
// and the oracle see identical numbers.
func testWeights(t testing.TB, cfg Config, seed uint64) map[string][]float64 {
	t.Helper()
	specs, err := ParamSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	w := map[string][]float64{}
	for _, s := range specs {
		v := make([]float64, s.Size())
		for i := range v {
			if s.Std == 0 {
				v[i] = float64(float32(s.Const + 0.2*rng.NormFloat64()))
			} else {
				v[i] = float64(float32(0.3 * rng.NormFloat64()))
			}
		}
		w[s.Name] = v
	}
	return w
}

// testBatch is three sets of 5, 3 and 4 rows padded to 5, with junk in the padding, six candidates
// (one a pure negative) and overlapping positive sets.
func testBatch(cfg Config, seed uint64) oracleBatch {
	rng := rand.New(rand.NewPCG(seed, 2))
	sizes := []int{5, 3, 4}
	bt := oracleBatch{B: 3, N: 5, C: 6, Positives: [][]int{{0, 1}, {2}, {3, 4, 1}}}
	d, e := cfg.InputDim, cfg.CandidateDim
	bt.U = make([]float64, bt.B*bt.N*d)
	bt.Mask = make([]bool, bt.B*bt.N)
	for b, sz := range sizes {
		for i := 0; i < bt.N; i++ {
			bt.Mask[b*bt.N+i] = i < sz
			for j := 0; j < d; j++ {
				v := rng.NormFloat64()
				if i >= sz {
					v *= 100 // padding: any content, here large
				}
				bt.U[(b*bt.N+i)*d+j] = float64(float32(v))
			}
		}
	}
	bt.Cand = make([]float64, bt.C*e)
	for i := range bt.Cand {
		bt.Cand[i] = float64(float32(rng.NormFloat64()))
	}
	return bt
}
