package settransformer

import (
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses/ot"
)

// TestBuilderTableMatchesSpecs holds the model's parameter table to ParamSpecs: the same names,
// shapes and order (the checkpoint format), the project's decay rule, and a loss's dustbin score
// after the model's own parameters.
func TestBuilderTableMatchesSpecs(t *testing.T) {
	lossCfg := ot.DefaultConfig()
	lossCfg.Variant = ot.Dustbin
	retr := testConfig()
	retr.LearnTemperature = true
	m, err := New(testBackend(t), retr, 1)
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUnmix(testBackend(t), testUnmixConfig(), 1, WithLoss(lossCfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		ps    *engine.Params
		extra []string // parameters registered by the loss, after the model's
	}{
		{"retrieval", retr, m.Params(), nil},
		{"unmix+dustbin", testUnmixConfig(), u.Params(), []string{ot.DustbinParamName}},
	} {
		specs, err := ParamSpecs(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		views := tc.ps.Views()
		if len(views) != len(specs)+len(tc.extra) {
			t.Fatalf("%s: %d parameters, ParamSpecs lists %d (+%d from the loss)", tc.name, len(views), len(specs), len(tc.extra))
		}
		for i, s := range specs {
			v := views[i]
			if v.Name != s.Name || !slices.Equal(v.Shape, s.Shape) || v.Decay != engine.DefaultDecay(s.Name, s.Shape) {
				t.Errorf("%s: parameter %d is %s %v decay %v, spec %s %v decay %v", tc.name, i, v.Name, v.Shape, v.Decay, s.Name, s.Shape, engine.DefaultDecay(s.Name, s.Shape))
			}
			want := make([]float32, s.Size())
			if err := s.Init(want, 1); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Tensor.ToHost(), want) {
				t.Errorf("%s: %s does not hold ParamSpec.Init's values", tc.name, s.Name)
			}
		}
		for i, name := range tc.extra {
			if got := views[len(specs)+i].Name; got != name {
				t.Errorf("%s: parameter %d is %s, want %s", tc.name, len(specs)+i, got, name)
			}
		}
	}
}

// noMemBackend lays out parameter tables and counts AdamW launches without allocating: a
// paper-size model's parameters, gradients and moments are about a gigabyte. Any other method
// reaches the nil embedded Backend and panics, which would mean the test exercised more than it
// means to.
type noMemBackend struct {
	engine.Backend
	launches []int // the element count of each AdamW call, in order
}

// noMemStorage is storage that claims n elements and holds none.
type noMemStorage struct {
	be *noMemBackend
	n  int
}

func (s noMemStorage) Backend() engine.Backend { return s.be }
func (s noMemStorage) Len() int                { return s.n }

func (b *noMemBackend) Alloc(n int) (engine.Storage, error) { return noMemStorage{b, n}, nil }

func (b *noMemBackend) AdamW(p, _, _, _ *engine.Tensor, _ engine.AdamWStep) {
	b.launches = append(b.launches, p.Size())
}

// TestPaperAdamWLaunches counts the AdamW kernels of one step of the paper-size models: two (one
// per decay class), where updating runs of equal decay in registration order took 99 (retrieval).
func TestPaperAdamWLaunches(t *testing.T) {
	retr, err := Preset("paper")
	if err != nil {
		t.Fatal(err)
	}
	unmix := retr
	unmix.Task, unmix.DecLayers, unmix.Slots = TaskUnmix, 4, 64
	for _, tc := range []struct {
		name      string
		cfg       Config
		oldLaunch int // runs of equal decay in registration order, the launches before the layout
	}{
		{"retrieval", retr, 99},
		{"unmix", unmix, 0},
	} {
		if err := tc.cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pb := newParamBuilder()
		pb.declare(tc.cfg)
		be := &noMemBackend{}
		if err := pb.ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
		views := pb.ps.Views()
		runs := 1
		for i := 1; i < len(views); i++ {
			if views[i].Decay != views[i-1].Decay {
				runs++
			}
		}
		if tc.oldLaunch != 0 && runs != tc.oldLaunch {
			t.Errorf("%s: %d runs of equal decay in registration order, want %d", tc.name, runs, tc.oldLaunch)
		}
		opt, err := engine.NewAdamW(pb.ps, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		opt.Step()
		var decayed int
		for _, v := range views {
			if v.Decay {
				decayed += v.Size
			}
		}
		want := []int{decayed, pb.ps.Len() - decayed}
		t.Logf("%s: %d AdamW launches a step (sizes %v); registration order had %d runs", tc.name, len(be.launches), be.launches, runs)
		if !slices.Equal(be.launches, want) {
			t.Errorf("%s: AdamW launches of sizes %v, want %v (decayed, then the rest)", tc.name, be.launches, want)
		}
	}
}
