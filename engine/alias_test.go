package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
)

// aliasCase is an op given one activation as several of its inputs, with its
// float64 reference.
type aliasCase struct {
	name  string
	dims  []int // the parameter's (and the activation's) shape
	build func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor
	ref   func(x []float64) []float64
}

func aliasCases() []aliasCase {
	const B, N, h, heads = 2, 3, 4, 2
	return []aliasCase{
		{"SwiGLU(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.SwiGLU(x, x) },
			func(x []float64) []float64 { return refZip(x, x, func(a, b float64) float64 { return refSilu(a) * b }) }},
		{"Add(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Add(x, x) },
			func(x []float64) []float64 { return refZip(x, x, func(a, b float64) float64 { return a + b }) }},
		{"Sub(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Add(tp.Sub(x, x), tp.Square(x)) },
			func(x []float64) []float64 { return refMap(x, func(a float64) float64 { return a * a }) }},
		{"Mul(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Mul(x, x) },
			func(x []float64) []float64 { return refZip(x, x, func(a, b float64) float64 { return a * b }) }},
		{"Div(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Add(tp.Div(x, x), tp.Square(x)) },
			func(x []float64) []float64 { return refMap(x, func(a float64) float64 { return 1 + a*a }) }},
		{"MatMul(x, x^T)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.MatMul(x, x, false, true) },
			func(x []float64) []float64 { return refMatMul(x, x, 1, 3, 4, 3, false, true) }},
		{"Linear(x, x)", []int{3, 4},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Linear(x, x) },
			func(x []float64) []float64 { return refLinear(x, x, 3, 4, 3) }},
		{"Attention(x, x, x)", []int{B, N, h},
			func(tp *engine.Tape, x *engine.Tensor) *engine.Tensor { return tp.Attention(x, x, x, nil, heads) },
			func(x []float64) []float64 { return refAttention(x, x, x, nil, B, N, N, h, heads) }},
	}
}

// TestAliasedInputsAccumulateAcrossSteps: an op that receives one activation
// as several inputs must add every input's gradient into that activation's
// one buffer. The buffer is recycled from the gradient pool, so from the
// second step on it holds the previous step's numbers: each step's parameter
// gradient is checked against central finite differences of the float64
// reference, over three steps on one tape with different parameter values
// and ZeroGrad between.
func TestAliasedInputsAccumulateAcrossSteps(t *testing.T) {
	for _, be := range testBackends(t) {
		for _, tc := range aliasCases() {
			t.Run(fmt.Sprintf("%s/%s", tc.name, be.BLAS().Name()[:5]), func(t *testing.T) {
				ps := engine.NewParams()
				p := ps.Add("p", tc.dims, false)
				if err := ps.Alloc(be); err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(11, uint64(len(tc.name))))
				tp := engine.NewTape(be)
				var weights []float32
				for step := range 3 {
					host := make([]float32, p.Size())
					for i := range host {
						host[i] = float32(r.NormFloat64())
					}
					if err := p.CopyFrom(host); err != nil {
						t.Fatal(err)
					}
					tp.Reset()
					// x is an activation (its gradient comes from the pool), unlike p.
					x := tp.Scale(p, 1)
					y := tc.build(tp, x)
					if weights == nil {
						weights = make([]float32, y.Size())
						for i := range weights {
							weights[i] = float32(r.NormFloat64())
						}
					}
					loss := tp.Sum(tp.Mul(y, tp.Input(weights, y.Shape()...)))
					if err := tp.Backward(loss); err != nil {
						t.Fatal(err)
					}
					got := p.Grad().ToHost()
					x64 := to64(host)
					refLoss := func() float64 {
						var s float64
						for i, v := range tc.ref(x64) {
							s += v * float64(weights[i])
						}
						return s
					}
					for j := range x64 {
						orig := x64[j]
						x64[j] = orig + fdStep
						lp := refLoss()
						x64[j] = orig - fdStep
						lm := refLoss()
						x64[j] = orig
						if fd := (lp - lm) / (2 * fdStep); !closeEnough(float64(got[j]), fd) {
							t.Fatalf("step %d: d loss / d p[%d] = %.7g, finite difference %.7g", step+1, j, got[j], fd)
						}
					}
					ps.ZeroGrad()
				}
			})
		}
	}
}
