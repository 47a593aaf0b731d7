package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// stackModel is P linear weights (out, in), registered one after another with a norm weight
// before them (so the stack is not at offset 0 of the buffer), and their Stack view.
type stackModel struct {
	ps    *engine.Params
	parts []*engine.Tensor
	stack *engine.Tensor
}

func newStackModel(t *testing.T, be engine.Backend, P, out, in int, seed uint64) stackModel {
	t.Helper()
	m := stackModel{ps: engine.NewParams()}
	norm := m.ps.Add("norm.weight", []int{in}, false)
	for i := range P {
		m.parts = append(m.parts, m.ps.Add(fmt.Sprintf("p%d.weight", i), []int{out, in}, true))
	}
	m.stack = m.ps.Stack("stack", m.parts...)
	if err := m.ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, w := range append([]*engine.Tensor{norm}, m.parts...) {
		v := make([]float32, w.Size())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		if err := w.CopyFrom(v); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestLinearStackMatchesSeparateLinears: one strided GEMM over stacked weights gives bit for bit
// the outputs and the gradients (of x and of every weight) of P separate Linear calls, on every
// CPU library, with the row split forced, for 2 and 3 parts, and when a part's output is unused
// (its weight's gradient is then exactly zero, not whatever the recycled buffer held).
func TestLinearStackMatchesSeparateLinears(t *testing.T) {
	const B, N, in, out = 2, 5, 6, 4
	for _, be := range testBackends(t) {
		for _, tc := range []struct {
			P    int
			used []bool
		}{{3, []bool{true, true, true}}, {2, []bool{true, true}}, {3, []bool{true, false, true}}} {
			name := fmt.Sprintf("%s P=%d used=%v", be.Name(), tc.P, tc.used)
			rng := rand.New(rand.NewPCG(7, uint64(tc.P)))
			x := make([]float32, B*N*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			coef := make([][]float32, tc.P) // a fixed random weighting of every output element
			for i := range coef {
				coef[i] = make([]float32, B*N*out)
				for j := range coef[i] {
					coef[i][j] = float32(rng.NormFloat64())
				}
			}
			run := func(stacked bool) (ys [][]float32, dx []float32, dws [][]float32) {
				m := newStackModel(t, be, tc.P, out, in, 3)
				// Two steps on one tape: the first uses every part, so the recycled gradient
				// buffers that the second reuses hold values in every block.
				tp := engine.NewTape(be)
				for step := range 2 {
					tp.Reset()
					m.ps.ZeroGrad()
					xv := tp.Variable(x, B, N, in)
					outs := make([]*engine.Tensor, tc.P)
					if stacked {
						tp.LinearStack(xv, m.stack, outs)
					} else {
						for i, w := range m.parts {
							outs[i] = tp.Linear(xv, w)
						}
					}
					var terms []*engine.Tensor
					for i, y := range outs {
						if tc.used[i] || step == 0 {
							terms = append(terms, tp.Sum(tp.Mul(y, tp.Input(coef[i], B, N, out))))
						}
					}
					loss := tp.WeightedSum(slices.Repeat([]float32{1}, len(terms)), terms...)
					if err := tp.Backward(loss); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ys = ys[:0]
					for _, y := range outs {
						ys = append(ys, y.ToHost())
					}
					dx = xv.Grad().ToHost()
				}
				for _, w := range m.parts {
					dws = append(dws, w.Grad().ToHost())
				}
				return ys, dx, dws
			}
			ys, dx, dws := run(true)
			wantYs, wantDx, wantDws := run(false)
			for i := range ys {
				if !slices.Equal(ys[i], wantYs[i]) {
					t.Errorf("%s: output %d differs from Linear's", name, i)
				}
				if !slices.Equal(dws[i], wantDws[i]) {
					t.Errorf("%s: gradient of weight %d differs from Linear's", name, i)
				}
				if !tc.used[i] && slices.ContainsFunc(dws[i], func(v float32) bool { return v != 0 }) {
					t.Errorf("%s: unused part %d has a non-zero weight gradient", name, i)
				}
			}
			if !slices.Equal(dx, wantDx) {
				t.Errorf("%s: gradient of x differs from Linear's", name)
			}
		}
	}
}

// TestParamsStackRejects: a stack whose parts are not side by side in the buffer (another
// parameter registered between them, or parts of different decay), of different shapes, or of
// another table is an error of Alloc (or of Stack), not a silent view of the wrong memory.
func TestParamsStackRejects(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		build func(ps *engine.Params)
		want  string
	}{
		{"gap", func(ps *engine.Params) {
			a := ps.Add("a.weight", []int{2, 3}, true)
			ps.Add("between.weight", []int{2, 3}, true)
			b := ps.Add("b.weight", []int{2, 3}, true)
			ps.Stack("s", a, b)
		}, "does not follow"},
		{"decay", func(ps *engine.Params) {
			a := ps.Add("a.weight", []int{2, 3}, true)
			b := ps.Add("b.weight", []int{2, 3}, false)
			ps.Add("c.weight", []int{2, 3}, true) // decayed, so laid out between a and b
			ps.Stack("s", a, b)
		}, "does not follow"},
		{"shape", func(ps *engine.Params) {
			a := ps.Add("a.weight", []int{2, 3}, true)
			b := ps.Add("b.weight", []int{3, 3}, true)
			ps.Stack("s", a, b)
		}, "one shape"},
		{"foreign", func(ps *engine.Params) {
			a := ps.Add("a.weight", []int{2, 3}, true)
			other := engine.NewParams()
			b := other.Add("b.weight", []int{2, 3}, true)
			ps.Stack("s", a, b)
		}, "not a parameter of this table"},
	} {
		ps := engine.NewParams()
		tc.build(ps)
		if err := ps.Alloc(be); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Alloc error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
