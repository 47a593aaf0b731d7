package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// refRoPE rotates x: (M, heads*hd) in float64 with the (T, hd) cos|sin
// table the engine reads, row r at position r mod T.
func refRoPE(x, table []float64, M, T, heads, hd int) []float64 {
	half := hd / 2
	y := make([]float64, len(x))
	for r := range M {
		p := r % T
		for j := range heads {
			o := r*heads*hd + j*hd
			for i := range half {
				c, s := table[p*hd+i], table[p*hd+half+i]
				a, b := x[o+i], x[o+i+half]
				y[o+i] = a*c - b*s
				y[o+i+half] = b*c + a*s
			}
		}
	}
	return y
}

func ropeTable(t *testing.T, T, hd int, theta float64) []float32 {
	t.Helper()
	tab, err := engine.RoPETable(T, hd, theta)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestRoPEGradient: forward against the float64 rotation and the gradient
// (the inverse rotation of dy) against finite differences, for 2 sequences
// of 3 positions, 2 heads of width 4; theta 3 makes every pair turn by a
// sizeable angle.
func TestRoPEGradient(t *testing.T) {
	const B, T, heads, hd = 2, 3, 2, 4
	tab := ropeTable(t, T, hd, 3)
	for _, be := range testBackends(t) {
		for _, three := range []bool{false, true} {
			tc := gradCase{name: fmt.Sprintf("RoPE/3d=%v", three),
				inputs: []testInput{{dims: []int{B * T, heads * hd}, grad: true}, {dims: []int{T, hd}, data: tab}},
				build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
					x := xs[0]
					if three {
						x = tp.Reshape(x, B, T, heads*hd)
					}
					return tp.RoPE(x, xs[1], heads)
				},
				ref: func(xs [][]float64) []float64 { return refRoPE(xs[0], xs[1], B*T, T, heads, hd) }}
			t.Run(fmt.Sprintf("%s/%s", tc.name, be.BLAS().Name()[:5]), func(t *testing.T) { runGradCase(t, be, tc) })
		}
	}
}

// TestRoPEKnownAnswers: position 0 is the identity (bit for bit); with
// hd = 2 the only frequency is 1, so position p turns (1, 0) to (cos p,
// sin p); every pair keeps its norm; and the backward of a rotation (the
// inverse rotation) applied to the rotated rows gives the input back.
func TestRoPEKnownAnswers(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetMinWork(1)
	tp := engine.NewTape(c)

	// hd = 2: angle p radians whatever theta.
	const T2 = 5
	x2 := make([]float32, 2*T2)
	for p := range T2 {
		x2[2*p] = 1
	}
	y2 := tp.RoPE(tp.Input(x2, T2, 2), tp.Input(ropeTable(t, T2, 2, 10000), T2, 2), 1).ToHost()
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	for p := range T2 {
		if dc, ds := float64(y2[2*p])-math.Cos(float64(p)), float64(y2[2*p+1])-math.Sin(float64(p)); math.Abs(dc) > 1e-7 || math.Abs(ds) > 1e-7 {
			t.Errorf("position %d: (1, 0) -> (%g, %g), want (cos %d, sin %d)", p, y2[2*p], y2[2*p+1], p, p)
		}
	}

	const B, T, heads, hd = 3, 7, 3, 8
	r := rand.New(rand.NewPCG(27, 1))
	x := make([]float32, B*T*heads*hd)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	tab := tp.Input(ropeTable(t, T, hd, 10000), T, hd)
	xv := tp.Variable(x, B*T, heads*hd)
	yt := tp.RoPE(xv, tab, heads)
	y := yt.ToHost()
	// loss = sum(y * c) with c = y's values: d loss / dx = R^T y = R^T R x = x.
	if err := tp.Backward(tp.Sum(tp.Mul(yt, tp.Input(y, B*T, heads*hd)))); err != nil {
		t.Fatal(err)
	}
	back := xv.Grad().ToHost()
	half := hd / 2
	for row := range B * T {
		for j := range heads {
			o := row*heads*hd + j*hd
			for i := range half {
				a, b := x[o+i], x[o+i+half]
				ya, yb := y[o+i], y[o+i+half]
				if row%T == 0 && (ya != a || yb != b) {
					t.Fatalf("row %d (position 0) head %d pair %d: (%g, %g) -> (%g, %g), want unchanged", row, j, i, a, b, ya, yb)
				}
				n0 := math.Hypot(float64(a), float64(b))
				if n1 := math.Hypot(float64(ya), float64(yb)); math.Abs(n1-n0) > 1e-6*(1+n0) {
					t.Fatalf("row %d head %d pair %d: norm %g -> %g", row, j, i, n0, n1)
				}
				for _, k := range []int{o + i, o + i + half} {
					if d := math.Abs(float64(back[k] - x[k])); d > 1e-6*(1+math.Abs(float64(x[k]))) {
						t.Fatalf("inverse rotation of the rotation [%d] = %g, want x = %g", k, back[k], x[k])
					}
				}
			}
		}
	}
}

// TestRoPEMatchesLlama: the engine's rotation gives models/llama's numbers.
// models/llama keeps its rotation unexported, so the reference here is its
// recipe written out independently: inverse frequencies theta^(-2i/hd) and
// angles in float64 (here through exp and log, not Pow), cos and sin rounded
// to float32, then llama's rotate in float32 arithmetic. Compared at
// positions up to 4095 (a long context, where a table in float32 angles
// would drift) to 1e-6.
func TestRoPEMatchesLlama(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const T, heads, hd, theta = 4096, 2, 64, 10000.0
	positions := []int{0, 1, 2, 17, 128, 1000, 4095}
	tp := engine.NewTape(c)
	r := rand.New(rand.NewPCG(27, 2))
	x := make([]float32, T*heads*hd)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := tp.RoPE(tp.Input(x, T, heads*hd), tp.Input(ropeTable(t, T, hd, theta), T, hd), heads).ToHost()
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	half := hd / 2
	for _, p := range positions {
		cos, sin := make([]float32, half), make([]float32, half)
		for i := range half {
			f := math.Exp(-float64(2*i) / float64(hd) * math.Log(theta))
			s, c := math.Sincos(float64(p) * f)
			cos[i], sin[i] = float32(c), float32(s)
		}
		for j := range heads {
			o := p*heads*hd + j*hd
			want := append([]float32(nil), x[o:o+hd]...)
			for i := range half { // llama's rotate
				a, b := want[i], want[i+half]
				want[i] = a*cos[i] - b*sin[i]
				want[i+half] = b*cos[i] + a*sin[i]
			}
			for i, w := range want {
				if d := math.Abs(float64(y[o+i] - w)); d > 1e-6 {
					t.Fatalf("position %d head %d [%d]: engine %.9g, llama's recipe %.9g", p, j, i, y[o+i], w)
				}
			}
		}
	}
}

// TestRoPERefusals: shapes that do not fit the table, and a table that
// would receive a gradient, fail the tape with a reason.
func TestRoPERefusals(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := engine.RoPETable(4, 3, 10000); err == nil {
		t.Error("RoPETable accepted an odd head width")
	}
	if _, err := engine.RoPETable(4, 4, 1); err == nil {
		t.Error("RoPETable accepted theta 1")
	}
	tab := ropeTable(t, 3, 4, 10000)
	for name, build := range map[string]func(tp *engine.Tape) *engine.Tensor{
		"rows not a multiple of T": func(tp *engine.Tape) *engine.Tensor {
			return tp.RoPE(tp.Input(make([]float32, 4*8), 4, 8), tp.Input(tab, 3, 4), 2)
		},
		"width not heads*hd": func(tp *engine.Tape) *engine.Tensor {
			return tp.RoPE(tp.Input(make([]float32, 3*8), 3, 8), tp.Input(tab, 3, 4), 3)
		},
		"table with a gradient": func(tp *engine.Tape) *engine.Tensor {
			return tp.RoPE(tp.Input(make([]float32, 3*8), 3, 8), tp.Variable(tab, 3, 4), 2)
		},
	} {
		tp := engine.NewTape(c)
		build(tp)
		if tp.Err() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
