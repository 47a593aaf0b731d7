package settransformer

import (
	"fmt"
	"maps"
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
		worst := checkDirectional(t, fmt.Sprintf("learn_tau=%v", learn), w, ref.Grads, groups, rng, func(moved map[string][]float64) float64 {
			res, err := runOracle(cfg, moved, bt, false)
			if err != nil {
				t.Fatal(err)
			}
			return res.Loss
		})
		t.Logf("learn_tau=%v loss %.6f, %d directions, worst relative FD error %.2e", learn, ref.Loss, len(groups), worst)
	}
}

// checkDirectional compares, for each group of parameter names, the oracle's gradient grads
// projected on a random direction over those parameters with the central finite difference
// (step 1e-6) of loss along it, starting from weights w; it reports a group whose two differ by
// more than 1e-6 + 1e-5 |fd| and returns the worst relative error.
func checkDirectional(t *testing.T, label string, w, grads map[string][]float64, groups [][]string, rng *rand.Rand,
	loss func(map[string][]float64) float64) float64 {
	t.Helper()
	const step = 1e-6
	worst := 0.0
	for _, names := range groups {
		dir := map[string][]float64{}
		var dot float64 // gradient . direction
		for _, name := range names {
			d := make([]float64, len(w[name]))
			for i := range d {
				d[i] = rng.NormFloat64()
				dot += d[i] * grads[name][i]
			}
			dir[name] = d
		}
		shift := func(sign float64) float64 {
			moved := maps.Clone(w)
			for name, d := range dir {
				m := make([]float64, len(d))
				for i := range d {
					m[i] = w[name][i] + sign*step*d[i]
				}
				moved[name] = m
			}
			return loss(moved)
		}
		fd := (shift(1) - shift(-1)) / (2 * step)
		errAbs := math.Abs(fd - dot)
		worst = math.Max(worst, errAbs/math.Max(math.Abs(fd), 1e-3))
		if errAbs > 1e-6+1e-5*math.Abs(fd) {
			t.Errorf("%s %v: oracle directional derivative %.10g, finite difference %.10g", label, names[0], dot, fd)
		}
	}
	return worst
}
