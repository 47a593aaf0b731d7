package settransformer

import (
	"math"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses/ot"
)

// TestConfiguredEpsReachesEveryRMSNorm: a model built with an RMSNorm eps other than the default
// trains (forward, backward, an AdamW step) and matches the float64 oracle run with that eps.
// At eps 0.25, about the rows' mean square, every norm's output moves by tens of percent, so an
// RMSNorm left at 1e-5 anywhere in the encoder or decoder breaks the match; eps 1e-6 is the
// small value a config may ask for.
func TestConfiguredEpsReachesEveryRMSNorm(t *testing.T) {
	for _, eps := range []float64{1e-6, 0.25} {
		cfg := testConfig()
		cfg.Eps = eps
		w := testWeights(t, cfg, 3)
		bt := testBatch(cfg, 4)
		ref, err := runOracle(cfg, w, bt, true)
		if err != nil {
			t.Fatal(err)
		}
		m := modelWith(t, cfg, w)
		b, tg := engineBatch(bt)
		loss, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatalf("eps %g: %v", eps, err)
		}
		if e := math.Abs(float64(loss)-ref.Loss) / math.Abs(ref.Loss); e > 1e-5 {
			t.Errorf("eps %g: loss %.8g, oracle %.8g (relative error %.2e)", eps, loss, ref.Loss, e)
		}
		for _, v := range m.Params().Views() {
			if e := relErr(v.Tensor.Grad().ToHost(), ref.Grads[v.Name]); e > 1e-4 {
				t.Errorf("eps %g: gradient of %s differs from the oracle by %.2e", eps, v.Name, e)
			}
		}
		opt, err := engine.NewAdamW(m.Params(), engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		if err != nil {
			t.Fatal(err)
		}
		opt.Step()
		if err := engine.CheckFinite(m.Params()); err != nil {
			t.Fatalf("eps %g: after a step: %v", eps, err)
		}

		ucfg := testUnmixConfig()
		ucfg.Eps = eps
		uloss := testUnmixLoss(ot.Balanced)
		uw := testUnmixWeights(t, ucfg, uloss, 21)
		ubt := testUnmixBatch(ucfg, 22)
		uref, err := runUnmixOracle(ucfg, uloss, uw, ubt, false)
		if err != nil {
			t.Fatal(err)
		}
		um := unmixModelWith(t, ucfg, uloss, uw)
		ub, utg := engineUnmixBatch(ubt)
		total, err := um.ForwardBackward(ub, utg)
		if err != nil {
			t.Fatalf("unmix, eps %g: %v", eps, err)
		}
		if e := math.Abs(float64(total)-uref.Loss) / math.Abs(uref.Loss); e > 1e-5 {
			t.Errorf("unmix, eps %g: loss %.8g, oracle %.8g (relative error %.2e)", eps, total, uref.Loss, e)
		}
	}
}
