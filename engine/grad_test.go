package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// testInput is one input of an op under test.
type testInput struct {
	dims []int
	grad bool      // a Variable (checked against finite differences) or data
	data []float32 // nil: standard normal from the case's stream
}

// gradCase checks an op's forward against a float64 reference and its
// backward against central finite differences of that reference.
type gradCase struct {
	name   string
	inputs []testInput
	build  func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor
	ref    func(xs [][]float64) []float64
}

// testBackends returns CPU backends on OpenBLAS (when present) and on gonum,
// with parallel kernels forced even at test sizes.
func testBackends(t *testing.T) []*cpu.Backend {
	t.Helper()
	libs := []*blas.Library{blas.Gonum()}
	if lib, err := blas.OpenOpenBLAS(); err == nil {
		libs = append(libs, lib)
	}
	var out []*cpu.Backend
	for _, lib := range libs {
		c, err := cpu.New(cpu.Config{Workers: 2, BLAS: lib})
		if err != nil {
			t.Fatal(err)
		}
		c.SetMinWork(1)
		out = append(out, c)
	}
	return out
}

func prod(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Tolerances: the engine computes in float32 (relative round-off ~1e-6 per
// operation, a few hundred operations deep at most here); the reference
// gradient is a float64 central difference with step 1e-6 (truncation
// ~1e-12, cancellation ~1e-10). So |engine - reference| <= atol + rtol*|ref|
// with atol = 1e-4 and rtol = 1e-3 leaves a wide margin for round-off but not
// for a wrong formula (which errs by O(1)).
const (
	gradAtol = 1e-4
	gradRtol = 1e-3
	fdStep   = 1e-6
)

func runGradCase(t *testing.T, be *cpu.Backend, tc gradCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
	host := make([][]float32, len(tc.inputs))
	for i, in := range tc.inputs {
		if in.data != nil {
			host[i] = in.data
			continue
		}
		host[i] = make([]float32, prod(in.dims))
		for j := range host[i] {
			host[i][j] = float32(r.NormFloat64())
		}
	}
	tp := engine.NewTape(be)
	var xs []*engine.Tensor
	var out *engine.Tensor
	var weights []float32
	// Two passes on one tape: the first (on other values) leaves stale
	// numbers in the recycled arena and gradient buffers, so the second
	// shows that every kernel overwrites or clears what it must.
	for pass := range 2 {
		tp.Reset()
		xs = make([]*engine.Tensor, len(tc.inputs))
		for i, in := range tc.inputs {
			vals := host[i]
			if pass == 0 && in.data == nil {
				vals = make([]float32, len(host[i]))
				for j, v := range host[i] {
					vals[j] = 1.3*v + 0.7
				}
			}
			if in.grad {
				xs[i] = tp.Variable(vals, in.dims...)
			} else {
				xs[i] = tp.Input(vals, in.dims...)
			}
		}
		out = tc.build(tp, xs)
		if tp.Err() != nil {
			t.Fatalf("%s: %v", tc.name, tp.Err())
		}
		// Loss = sum(out * R) with a fixed random R, so that every output
		// element carries a distinct weight into the gradient.
		if weights == nil {
			weights = make([]float32, out.Size())
			for i := range weights {
				weights[i] = float32(r.NormFloat64())
			}
		}
		R := tp.Input(weights, out.Shape()...)
		loss := tp.Sum(tp.Mul(out, R))
		if err := tp.Backward(loss); err != nil {
			t.Fatalf("%s: backward: %v", tc.name, err)
		}
	}

	ref64 := make([][]float64, len(host))
	for i := range host {
		ref64[i] = to64(host[i])
	}
	want := tc.ref(ref64)
	got := out.ToHost()
	if len(want) != len(got) {
		t.Fatalf("%s: engine gives %d outputs, reference %d", tc.name, len(got), len(want))
	}
	for i := range want {
		if !closeEnough(float64(got[i]), want[i]) {
			t.Fatalf("%s: forward[%d] = %.7g, reference %.7g", tc.name, i, got[i], want[i])
		}
	}
	refLoss := func() float64 {
		y := tc.ref(ref64)
		var s float64
		for i, v := range y {
			s += v * float64(weights[i])
		}
		return s
	}
	for i, in := range tc.inputs {
		if !in.grad {
			continue
		}
		g := xs[i].Grad()
		if g == nil {
			t.Fatalf("%s: input %d has no gradient", tc.name, i)
		}
		gh := g.ToHost()
		for j := range ref64[i] {
			orig := ref64[i][j]
			ref64[i][j] = orig + fdStep
			lp := refLoss()
			ref64[i][j] = orig - fdStep
			lm := refLoss()
			ref64[i][j] = orig
			fd := (lp - lm) / (2 * fdStep)
			if !closeEnough(float64(gh[j]), fd) {
				t.Fatalf("%s: d loss / d input%d[%d] = %.7g, finite difference %.7g", tc.name, i, j, gh[j], fd)
			}
		}
	}
}

func closeEnough(got, want float64) bool {
	if math.IsInf(want, 0) || math.IsNaN(want) {
		return got == want || (math.IsNaN(got) && math.IsNaN(want))
	}
	return math.Abs(got-want) <= gradAtol+gradRtol*math.Abs(want)
}

func TestOpsForwardAndGradients(t *testing.T) {
	for _, be := range testBackends(t) {
		for _, tc := range gradCases() {
			t.Run(fmt.Sprintf("%s/%s", tc.name, be.BLAS().Name()[:5]), func(t *testing.T) {
				runGradCase(t, be, tc)
			})
		}
	}
}

// masks used by the attention cases: a prefix mask (padding trails the real
// keys, the products stop early) and a scattered one (probabilities zeroed).
var (
	prefixMask    = []float32{1, 1, 1, 0, 0, 1, 1, 1, 1, 1}
	scatteredMask = []float32{1, 0, 1, 1, 0, 0, 1, 1, 0, 1}
	emptySetMask  = []float32{0, 0, 0, 0, 0, 1, 0, 1, 1, 0}
)

func positiveData() []float32 {
	r := rand.New(rand.NewPCG(3, 3))
	x := make([]float32, 24)
	for i := range x {
		x[i] = 0.5 + r.Float32()*2
	}
	return x
}

func gradCases() []gradCase {
	g, d := true, false
	in := func(grad bool, dims ...int) testInput { return testInput{dims: dims, grad: grad} }
	// h 8 (head width 4) runs the CPU's BLAS kernels, h 32 (width 16) its register-block ones.
	attnH := func(name string, mask []float32, Nq, h int) gradCase {
		const B, Nk, heads = 2, 5, 2
		ins := []testInput{in(g, B, Nq, h), in(g, B, Nk, h), in(g, B, Nk, h)}
		if mask != nil {
			ins = append(ins, testInput{dims: []int{B, Nk}, data: mask})
		}
		return gradCase{name: name, inputs: ins,
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				var m *engine.Tensor
				if len(xs) > 3 {
					m = xs[3]
				}
				return tp.Attention(xs[0], xs[1], xs[2], m, heads)
			},
			ref: func(xs [][]float64) []float64 {
				var m []float64
				if len(xs) > 3 {
					m = xs[3]
				}
				return refAttention(xs[0], xs[1], xs[2], m, B, Nq, Nk, h, heads)
			}}
	}
	// Nq != Nk (5 keys) is cross attention: queries and keys from different sets.
	attn := func(name string, mask []float32, Nq int) gradCase { return attnH(name, mask, Nq, 8) }
	cases := []gradCase{
		{name: "Linear", inputs: []testInput{in(g, 2, 3, 5), in(g, 4, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Linear(xs[0], xs[1]) },
			ref:   func(xs [][]float64) []float64 { return refLinear(xs[0], xs[1], 6, 5, 4) }},
		{name: "RMSNorm", inputs: []testInput{in(g, 3, 7), in(g, 7)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.RMSNorm(xs[0], xs[1], engine.RMSNormEps)
			},
			ref: func(xs [][]float64) []float64 { return refRMSNorm(xs[0], xs[1], 7, engine.RMSNormEps) }},
		// An eps near the rows' mean square (standard normal inputs: about 1) changes every
		// output and the gradient through 1/rms; the backward must follow the forward's eps.
		{name: "RMSNorm/eps=0.5", inputs: []testInput{in(g, 3, 7), in(g, 7)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.RMSNorm(xs[0], xs[1], 0.5) },
			ref:   func(xs [][]float64) []float64 { return refRMSNorm(xs[0], xs[1], 7, 0.5) }},
		attnH("Attention/h32-scattered-mask", scatteredMask, 7, 32),
		attnH("Attention/h32-nomask", nil, 5, 32),
		attnH("Attention/h32-empty-set", emptySetMask, 5, 32),
		attn("Attention/self-nomask", nil, 5),
		attn("Attention/prefix-mask", prefixMask, 5),
		attn("Attention/scattered-mask", scatteredMask, 5),
		attn("Attention/empty-set", emptySetMask, 5),
		attn("Attention/cross", scatteredMask, 3),
		{name: "SwiGLU", inputs: []testInput{in(g, 3, 4), in(g, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.SwiGLU(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return refSilu(a) * b })
			}},
		{name: "Add", inputs: []testInput{in(g, 2, 3), in(g, 2, 3)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Add(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a + b })
			}},
		{name: "Sub/scalar", inputs: []testInput{in(g, 2, 3), in(g, 1)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Sub(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a - b })
			}},
		{name: "Mul", inputs: []testInput{in(g, 2, 3), in(g, 2, 3)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Mul(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a * b })
			}},
		{name: "Div/scalar", inputs: []testInput{in(g, 2, 3), {dims: []int{1}, grad: g, data: []float32{1.7}}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Div(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a / b })
			}},
		{name: "Div", inputs: []testInput{in(g, 2, 3), {dims: []int{2, 3}, grad: g, data: positiveData()[:6]}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Div(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a / b })
			}},
		{name: "Scale", inputs: []testInput{in(g, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Scale(xs[0], -2.5) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], func(v float64) float64 { return -2.5 * v }) }},
		{name: "AddScalar", inputs: []testInput{in(g, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.AddScalar(xs[0], 3) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], func(v float64) float64 { return v + 3 }) }},
		{name: "Exp", inputs: []testInput{in(g, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Exp(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], math.Exp) }},
		{name: "Log", inputs: []testInput{{dims: []int{6}, grad: g, data: positiveData()[:6]}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Log(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], math.Log) }},
		{name: "Square", inputs: []testInput{in(g, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Square(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], func(v float64) float64 { return v * v }) }},
		{name: "Sqrt", inputs: []testInput{{dims: []int{6}, grad: g, data: positiveData()[:6]}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Sqrt(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], math.Sqrt) }},
		{name: "DivExp", inputs: []testInput{in(g, 2, 3), {dims: []int{1}, grad: g, data: []float32{-0.7}}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.DivExp(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				return refZip(xs[0], xs[1], func(a, b float64) float64 { return a / math.Exp(b) })
			}},
		{name: "PrependCLS", inputs: []testInput{in(g, 2, 3, 4), in(g, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				y, _ := tp.PrependCLS(xs[0], xs[1], nil)
				return y
			},
			ref: func(xs [][]float64) []float64 {
				var y []float64
				for b := range 2 {
					y = append(y, xs[1]...)
					y = append(y, xs[0][b*12:(b+1)*12]...)
				}
				return y
			}},
		{name: "Broadcast", inputs: []testInput{in(g, 2, 3)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Broadcast(xs[0], 3) },
			ref: func(xs [][]float64) []float64 {
				var y []float64
				for range 3 {
					y = append(y, xs[0]...)
				}
				return y
			}},
		{name: "TakeRow", inputs: []testInput{in(g, 2, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.TakeRow(xs[0], 1) },
			ref: func(xs [][]float64) []float64 {
				return append(append([]float64{}, xs[0][4:8]...), xs[0][16:20]...)
			}},
		{name: "MeanPool", inputs: []testInput{in(g, 2, 5, 3), {dims: []int{2, 5}, data: scatteredMask}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.MeanPool(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				y := make([]float64, 6)
				for b := range 2 {
					var n float64
					for i := range 5 {
						if xs[1][b*5+i] > 0.5 {
							n++
							for j := range 3 {
								y[b*3+j] += xs[0][(b*5+i)*3+j]
							}
						}
					}
					for j := range 3 {
						y[b*3+j] /= n
					}
				}
				return y
			}},
		{name: "MaskRows", inputs: []testInput{in(g, 2, 5, 3), {dims: []int{2, 5}, data: scatteredMask}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.MaskRows(xs[0], xs[1]) },
			ref: func(xs [][]float64) []float64 {
				y := append([]float64{}, xs[0]...)
				for r := range 10 {
					for j := range 3 {
						y[r*3+j] *= xs[1][r]
					}
				}
				return y
			}},
		{name: "L2Normalize", inputs: []testInput{in(g, 4, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.L2Normalize(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refL2Normalize(xs[0], 5) }},
		{name: "RowNorm", inputs: []testInput{in(g, 4, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.RowNorm(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refRowNorm(xs[0], 5) }},
		{name: "LogSumExp", inputs: []testInput{in(g, 2, 3, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.LogSumExp(tp.Scale(xs[0], 30)) },
			ref: func(xs [][]float64) []float64 {
				y := make([]float64, 6)
				for r := range y {
					y[r] = refLSE(refMap(xs[0][r*5:(r+1)*5], func(v float64) float64 { return 30 * v }), nil)
				}
				return y
			}},
		{name: "CosineScores", inputs: []testInput{in(g, 3, 4), in(g, 5, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.CosineScores(xs[0], xs[1], 0.5) },
			ref: func(xs [][]float64) []float64 {
				return refMap(refMatMul(refL2Normalize(xs[0], 4), refL2Normalize(xs[1], 4), 1, 3, 4, 5, false, true),
					func(v float64) float64 { return v / 0.5 })
			}},
		{name: "CosineScoresLearned", inputs: []testInput{in(g, 3, 4), in(g, 5, 4), {dims: []int{1}, grad: g, data: []float32{-1.2}}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.CosineScoresLearned(xs[0], xs[1], xs[2])
			},
			ref: func(xs [][]float64) []float64 {
				return refMap(refMatMul(refL2Normalize(xs[0], 4), refL2Normalize(xs[1], 4), 1, 3, 4, 5, false, true),
					func(v float64) float64 { return v / math.Exp(xs[2][0]) })
			}},
		{name: "InfoNCE", inputs: []testInput{in(g, 3, 5), {dims: []int{3, 5}, data: []float32{1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1}}},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.InfoNCE(tp.Scale(xs[0], 4), xs[1])
			},
			ref: func(xs [][]float64) []float64 {
				return []float64{refInfoNCE(refMap(xs[0], func(v float64) float64 { return 4 * v }), xs[1], 3, 5)}
			}},
		{name: "SumSquares", inputs: []testInput{in(g, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.SumSquares(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refSum(xs[0], func(v float64) float64 { return v * v }) }},
		{name: "Mean", inputs: []testInput{in(g, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Mean(xs[0]) },
			ref: func(xs [][]float64) []float64 {
				return refSum(xs[0], func(v float64) float64 { return v / 12 })
			}},
		{name: "FrobeniusNorm", inputs: []testInput{in(g, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.FrobeniusNorm(xs[0]) },
			ref: func(xs [][]float64) []float64 {
				return []float64{math.Sqrt(refSum(xs[0], func(v float64) float64 { return v * v })[0])}
			}},
		{name: "Transpose", inputs: []testInput{in(g, 2, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Transpose(xs[0]) },
			ref:   func(xs [][]float64) []float64 { return refTranspose(xs[0], 2, 3, 4) }},
		{name: "BroadcastAdd", inputs: []testInput{in(g, 2, 3, 4), in(g, 2, 3), in(g, 2, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.BroadcastAdd(xs[0], xs[1], xs[2]) },
			ref: func(xs [][]float64) []float64 {
				y := make([]float64, 24)
				for b := range 2 {
					for i := range 3 {
						for j := range 4 {
							y[(b*3+i)*4+j] = xs[0][(b*3+i)*4+j] + xs[1][b*3+i] + xs[2][b*4+j]
						}
					}
				}
				return y
			}},
		{name: "Reshape", inputs: []testInput{in(g, 2, 6)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Square(tp.Reshape(xs[0], 3, 4)) },
			ref:   func(xs [][]float64) []float64 { return refMap(xs[0], func(v float64) float64 { return v * v }) }},
		{name: "WeightedSum", inputs: []testInput{in(g, 3), in(g, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.WeightedSum([]float32{0.5, -2}, tp.SumSquares(xs[0]), tp.Sum(xs[1]))
			},
			ref: func(xs [][]float64) []float64 {
				return []float64{0.5*refSum(xs[0], func(v float64) float64 { return v * v })[0] - 2*refSum(xs[1], func(v float64) float64 { return v })[0]}
			}},
		// A tensor used twice: x feeds both factors of x x^T and the sum.
		{name: "ReuseTwice", inputs: []testInput{in(g, 3, 4)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.Add(tp.MatMul(xs[0], xs[0], false, true), tp.MatMul(tp.Square(xs[0]), xs[0], false, true))
			},
			ref: func(xs [][]float64) []float64 {
				a := refMatMul(xs[0], xs[0], 1, 3, 4, 3, false, true)
				b := refMatMul(refMap(xs[0], func(v float64) float64 { return v * v }), xs[0], 1, 3, 4, 3, false, true)
				return refZip(a, b, func(x, y float64) float64 { return x + y })
			}},
		// Data input: Linear must skip dX and still give dW.
		{name: "Linear/data-input", inputs: []testInput{in(d, 4, 5), in(g, 3, 5)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Linear(xs[0], xs[1]) },
			ref:   func(xs [][]float64) []float64 { return refLinear(xs[0], xs[1], 4, 5, 3) }},
	}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for _, batch := range []int{0, 2} {
				const n, k, m = 3, 4, 5
				ad, bd := []int{n, k}, []int{k, m}
				if tA {
					ad = []int{k, n}
				}
				if tB {
					bd = []int{m, k}
				}
				nb := 1
				if batch > 0 {
					ad, bd, nb = append([]int{batch}, ad...), append([]int{batch}, bd...), batch
				}
				cases = append(cases, gradCase{
					name:   fmt.Sprintf("MatMul/tA=%v,tB=%v,batch=%d", tA, tB, batch),
					inputs: []testInput{in(g, ad...), in(g, bd...)},
					build:  func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.MatMul(xs[0], xs[1], tA, tB) },
					ref:    func(xs [][]float64) []float64 { return refMatMul(xs[0], xs[1], nb, n, k, m, tA, tB) },
				})
			}
		}
	}
	return cases
}
