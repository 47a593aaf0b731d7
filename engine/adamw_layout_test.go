package engine_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestAdamWMatchesPerView: the update is elementwise, so updating each decay class in one call
// must give bit for bit what one call per parameter gives, over several steps.
func TestAdamWMatchesPerView(t *testing.T) {
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1,
		Schedule: func(step int) float32 { return 1e-2 / float32(step) }}
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	fused, _ := engine.LayoutTable()
	ref, _ := engine.LayoutTable()
	for _, ps := range []*engine.Params{fused, ref} {
		if err := ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range fused.Views() {
		w := draw(v.Size, 1)
		for _, ps := range []*engine.Params{fused, ref} {
			if tv, _ := ps.Lookup(v.Name); tv.CopyFrom(w) != nil {
				t.Fatal("copy failed")
			}
		}
	}
	optF, err := engine.NewAdamW(fused, cfg)
	if err != nil {
		t.Fatal(err)
	}
	optR, err := engine.NewAdamW(ref, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		for _, v := range fused.Views() {
			g := draw(v.Size, 0.1)
			for _, ps := range []*engine.Params{fused, ref} {
				tv, _ := ps.Lookup(v.Name)
				if err := tv.Grad().CopyFrom(g); err != nil {
					t.Fatal(err)
				}
			}
		}
		optF.Step()
		engine.StepPerView(optR) // the reference: one AdamW call per parameter
		stF, stR := optF.State(), optR.State()
		for _, v := range fused.Views() {
			f, _ := fused.Lookup(v.Name)
			r, _ := ref.Lookup(v.Name)
			if !slices.Equal(f.ToHost(), r.ToHost()) || !slices.Equal(stF.M[v.Name], stR.M[v.Name]) || !slices.Equal(stF.V[v.Name], stR.V[v.Name]) {
				t.Fatalf("step %d: %s (or its moments) differs from the per-parameter update", step, v.Name)
			}
			if slices.ContainsFunc(f.Grad().ToHost(), func(x float32) bool { return x != 0 }) {
				t.Fatalf("step %d: %s's gradient not left zero", step, v.Name)
			}
		}
	}
}
