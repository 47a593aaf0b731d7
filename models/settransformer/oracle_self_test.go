package settransformer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestOracleFiniteDifferences checks the gorgonia oracle itself against central differences of its
// own float64 forward pass: for every parameter tensor, the derivative along a random direction
// within that tensor must equal the gradient's dot product with the direction. With a learned
// temperature, log_tau and one direction over all parameters at once are checked.
func TestOracleFiniteDifferences(t *testing.T) {
	for _, learn := range []bool{false, true} {
		cfg := testConfig()
		cfg.LearnTemperature = learn
		w := testWeights(t, cfg, 7)
		bt := testBatch(cfg, 8)
		ref, err := runOracle(cfg, w, bt, true)
		if err != nil {
			t.Fatal(err)
		}
		specs, _ := ParamSpecs(cfg)
		rng := rand.New(rand.NewPCG(9, 9))
		groups := [][]string{}
		if learn {
			all := []string{}
			for _, s := range specs {
				all = append(all, s.Name)
			}
			groups = append(groups, []string{"log_tau"}, all)
		} else {
			for _, s := range specs {
				groups = append(groups, []string{s.Name})
			}
		}
		const step = 1e-6
		worst := 0.0
		for _, names := range groups {
			dir := map[string][]float64{}
			var dot float64 // gradient . direction
			for _, name := range names {
				v := make([]float64, len(w[name]))
				for i := range v {
					v[i] = rng.NormFloat64()
					dot += v[i] * ref.Grads[name][i]
				}
				dir[name] = v
			}
			shift := func(sign float64) float64 {
				moved := map[string][]float64{}
				for name, v := range w {
					moved[name] = v
				}
				for name, v := range dir {
					m := make([]float64, len(v))
					for i := range v {
						m[i] = w[name][i] + sign*step*v[i]
					}
					moved[name] = m
				}
				res, err := runOracle(cfg, moved, bt, false)
				if err != nil {
					t.Fatal(err)
				}
				return res.Loss
			}
			fd := (shift(1) - shift(-1)) / (2 * step)
			errAbs := math.Abs(fd - dot)
			worst = math.Max(worst, errAbs/math.Max(math.Abs(fd), 1e-3))
			if errAbs > 1e-6+1e-5*math.Abs(fd) {
				t.Errorf("learn_tau=%v %v: oracle directional derivative %.10g, finite difference %.10g", learn, names[0], dot, fd)
			}
		}
		t.Logf("learn_tau=%v loss %.6f, %d directions, worst relative FD error %.2e", learn, ref.Loss, len(groups), worst)
	}
}
