package settransformer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/losses/ot"
)

// testUnmixConfig is the small unmixing model every unmix comparison test uses: four slots, so
// that sets have more, as many and fewer clean rows than slots.
func testUnmixConfig() Config {
	return Config{InputDim: 12, Hidden: 16, Layers: 2, Heads: 2, MLPHidden: 24, Eps: DefaultEps,
		Task: TaskUnmix, DecLayers: 2, Slots: 4, Temperature: DefaultTemperature}
}

// testUnmixLoss is an unmix loss with every term on and weights away from 1, so that a term
// weighted twice or left out shows. eps 0.2 keeps |C/eps| small enough for the unshifted
// logsumexp of the oracle; six iterations exercise the unrolled backward.
func testUnmixLoss(v ot.Variant) ot.Config {
	return ot.Config{Variant: v, Eps: 0.2, Iters: 6, Rho: 0.5, DustbinInit: 1.5,
		WCyc: 0.7, WOT: 1.3, LambdaA: 0.05, WNorm: 0.3}
}

// testUnmixWeights is testWeights for the unmix model plus the dustbin score of a dustbin loss.
func testUnmixWeights(t testing.TB, cfg Config, loss ot.Config, seed uint64) map[string][]float64 {
	t.Helper()
	w := testWeights(t, cfg, seed)
	if loss.Variant == ot.Dustbin {
		w[ot.DustbinParamName] = []float64{float64(float32(loss.DustbinInit))}
	}
	return w
}

// testUnmixBatch is three sets of 5, 3 and 4 observed rows padded to 5 (set 1's real rows
// interleaved with padding, the others real-rows-first) with large junk in the padding, and
// 3, 2 and 4 clean rows padded to 4 with finite junk.
func testUnmixBatch(cfg Config, seed uint64) unmixOracleBatch {
	rng := rand.New(rand.NewPCG(seed, 3))
	d := cfg.InputDim
	bt := unmixOracleBatch{B: 3, N: 5, NH: 4, Clean: []int{3, 2, 4}}
	real := [][]bool{
		{true, true, true, true, true},
		{false, true, false, true, true},
		{true, true, true, true, false},
	}
	bt.U = make([]float64, bt.B*bt.N*d)
	bt.Mask = make([]bool, bt.B*bt.N)
	for b := range real {
		for i, r := range real[b] {
			bt.Mask[b*bt.N+i] = r
			for j := 0; j < d; j++ {
				v := rng.NormFloat64()
				if !r {
					v *= 100
				}
				bt.U[(b*bt.N+i)*d+j] = float64(float32(v))
			}
		}
	}
	bt.H = make([]float64, bt.B*bt.NH*d)
	for b, nc := range bt.Clean {
		var sum float64
		for i := 0; i < bt.NH; i++ {
			var ss float64
			for j := 0; j < d; j++ {
				v := float64(float32(rng.NormFloat64()))
				if i >= nc {
					v *= 50
				}
				bt.H[(b*bt.NH+i)*d+j] = v
				ss += v * v
			}
			if i < nc {
				sum += math.Sqrt(ss)
			}
		}
		bt.M = append(bt.M, float64(float32(sum/float64(nc))))
	}
	return bt
}

// engineUnmixBatch converts the oracle's batch to the model's inputs.
func engineUnmixBatch(bt unmixOracleBatch) (Batch, UnmixTargets) {
	mask := make([]float32, len(bt.Mask))
	for i, real := range bt.Mask {
		if real {
			mask[i] = 1
		}
	}
	return Batch{B: bt.B, N: bt.N, U: toF32(bt.U), Mask: mask},
		UnmixTargets{H: toF32(bt.H), CleanRows: bt.Clean, MeanNorm: toF32(bt.M)}
}

// unmixModelWith builds the unmix model for cfg and loss on the CPU with the weights w copied in.
func unmixModelWith(t testing.TB, cfg Config, loss ot.Config, w map[string][]float64) *UnmixModel {
	t.Helper()
	m, err := NewUnmix(testBackend(t), cfg, 1, WithLoss(loss))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(m.Params().Views()), len(w); got != want {
		t.Fatalf("model has %d parameters, the test weights %d", got, want)
	}
	for name, v := range w {
		if err := m.SetParam(name, toF32(v)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}
