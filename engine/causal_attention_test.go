package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// refCausalAttention is causal grouped-query attention in float64:
// q: (B, T, heads*hd), k, v: (B, T, kvHeads*hd), query head j reading kv
// head j / (heads/kvHeads), query t seeing keys 0..t.
func refCausalAttention(q, k, v []float64, B, T, heads, kvHeads, hd int) []float64 {
	qw, kw, group := heads*hd, kvHeads*hd, heads/kvHeads
	o := make([]float64, B*T*qw)
	for b := range B {
		for j := range heads {
			g := j / group
			for i := range T {
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for t := range i + 1 {
					var s float64
					for c := range hd {
						s += q[(b*T+i)*qw+j*hd+c] * k[(b*T+t)*kw+g*hd+c]
					}
					sc[t] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[t])
				}
				var z float64
				for t := range sc {
					sc[t] = math.Exp(sc[t] - mx)
					z += sc[t]
				}
				for t := range sc {
					for c := range hd {
						o[(b*T+i)*qw+j*hd+c] += sc[t] / z * v[(b*T+t)*kw+g*hd+c]
					}
				}
			}
		}
	}
	return o
}

// TestCausalAttentionGradient: forward against the float64 reference and
// gradients of q, k, v against finite differences, for multi-head (kv heads
// = heads), grouped-query (2 query heads per kv head) and multi-query
// attention.
func TestCausalAttentionGradient(t *testing.T) {
	const B, T, hd = 2, 5, 3
	for _, be := range testBackends(t) {
		for _, hk := range [][2]int{{2, 2}, {4, 2}, {3, 1}} {
			heads, kvHeads := hk[0], hk[1]
			tc := gradCase{name: fmt.Sprintf("CausalAttention/heads=%d/kv=%d", heads, kvHeads),
				inputs: []testInput{
					{dims: []int{B, T, heads * hd}, grad: true},
					{dims: []int{B, T, kvHeads * hd}, grad: true},
					{dims: []int{B, T, kvHeads * hd}, grad: true},
				},
				build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
					return tp.CausalAttention(xs[0], xs[1], xs[2], heads, kvHeads)
				},
				ref: func(xs [][]float64) []float64 {
					return refCausalAttention(xs[0], xs[1], xs[2], B, T, heads, kvHeads, hd)
				}}
			t.Run(fmt.Sprintf("%s/%s", tc.name, be.BLAS().Name()[:5]), func(t *testing.T) { runGradCase(t, be, tc) })
		}
	}
}

// TestCausalAttentionIsCausal: changing the q, k and v rows of positions
// s.. of one sequence leaves every output row before s bit-identical (and
// every row of the other sequence), while rows from s on do change; and the
// gradient that a loss on rows before s sends to the later inputs is
// exactly zero.
func TestCausalAttentionIsCausal(t *testing.T) {
	const B, T, heads, kvHeads, hd, s = 2, 9, 4, 2, 5, 4
	qw, kw := heads*hd, kvHeads*hd
	for _, be := range testBackends(t) {
		r := rand.New(rand.NewPCG(27, 3))
		q, k, v := randHost(r, B*T*qw), randHost(r, B*T*kw), randHost(r, B*T*kw)
		run := func(q, k, v []float32) []float32 {
			tp := engine.NewTape(be)
			o := tp.CausalAttention(tp.Input(q, B, T, qw), tp.Input(k, B, T, kw), tp.Input(v, B, T, kw), heads, kvHeads)
			if err := tp.Err(); err != nil {
				t.Fatal(err)
			}
			return o.ToHost()
		}
		base := run(q, k, v)
		q2, k2, v2 := append([]float32(nil), q...), append([]float32(nil), k...), append([]float32(nil), v...)
		for _, x := range []struct {
			a []float32
			w int
		}{{q2, qw}, {k2, kw}, {v2, kw}} {
			for i := s * x.w; i < T*x.w; i++ { // sequence 0, positions s..T-1
				x.a[i] = 3*x.a[i] + 1
			}
		}
		changed := run(q2, k2, v2)
		for i := range base {
			row, b := (i/qw)%T, i/(T*qw)
			if (b == 1 || row < s) && changed[i] != base[i] {
				t.Fatalf("%s: output [%d] (sequence %d, position %d) changed from %g to %g after positions >= %d changed",
					be.BLAS().Name(), i, b, row, base[i], changed[i], s)
			}
		}
		if changed[s*qw] == base[s*qw] {
			t.Fatalf("%s: position %d did not change with its own inputs: the test checks nothing", be.BLAS().Name(), s)
		}

		// Gradient: loss on positions < s only.
		tp := engine.NewTape(be)
		qv, kv, vv := tp.Variable(q, B, T, qw), tp.Variable(k, B, T, kw), tp.Variable(v, B, T, kw)
		o := tp.CausalAttention(qv, kv, vv, heads, kvHeads)
		w := make([]float32, B*T*qw)
		for i := range w {
			if (i/qw)%T < s {
				w[i] = float32(r.NormFloat64())
			}
		}
		if err := tp.Backward(tp.Sum(tp.Mul(o, tp.Input(w, B, T, qw)))); err != nil {
			t.Fatal(err)
		}
		for name, x := range map[string]struct {
			g []float32
			w int
		}{"q": {qv.Grad().ToHost(), qw}, "k": {kv.Grad().ToHost(), kw}, "v": {vv.Grad().ToHost(), kw}} {
			nonzero := false
			for i, gv := range x.g {
				if (i/x.w)%T >= s && gv != 0 {
					t.Fatalf("%s: d loss / d %s[%d] (position %d) = %g, want 0", be.BLAS().Name(), name, i, (i/x.w)%T, gv)
				}
				nonzero = nonzero || gv != 0
			}
			if !nonzero {
				t.Fatalf("%s: d loss / d %s is all zero: the test checks nothing", be.BLAS().Name(), name)
			}
		}
	}
}

// TestCausalAttentionKnownAnswers: the last position sees every key, so its
// row equals the non-causal Attention's (no mask); the first sees only
// itself, so its row is v's first row; and grouped-query attention equals
// multi-head attention with each kv head repeated for its query heads.
func TestCausalAttentionKnownAnswers(t *testing.T) {
	const B, T, heads, kvHeads, hd = 2, 6, 4, 2, 3
	qw, kw, group := heads*hd, kvHeads*hd, heads/kvHeads
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetMinWork(1)
	r := rand.New(rand.NewPCG(27, 4))
	q, k, v := randHost(r, B*T*qw), randHost(r, B*T*kw), randHost(r, B*T*kw)
	// k and v with each kv head repeated for its query heads: (B, T, qw).
	rep := func(x []float32) []float32 {
		y := make([]float32, B*T*qw)
		for row := range B * T {
			for j := range heads {
				copy(y[row*qw+j*hd:row*qw+(j+1)*hd], x[row*kw+(j/group)*hd:row*kw+(j/group+1)*hd])
			}
		}
		return y
	}
	kr, vr := rep(k), rep(v)
	tp := engine.NewTape(c)
	gqa := tp.CausalAttention(tp.Input(q, B, T, qw), tp.Input(k, B, T, kw), tp.Input(v, B, T, kw), heads, kvHeads).ToHost()
	mha := tp.CausalAttention(tp.Input(q, B, T, qw), tp.Input(kr, B, T, qw), tp.Input(vr, B, T, qw), heads, heads).ToHost()
	full := tp.Attention(tp.Input(q, B, T, qw), tp.Input(kr, B, T, qw), tp.Input(vr, B, T, qw), nil, heads).ToHost()
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range gqa {
		if gqa[i] != mha[i] {
			t.Fatalf("[%d]: grouped-query %g, multi-head with repeated kv heads %g", i, gqa[i], mha[i])
		}
	}
	for b := range B {
		last, first := (b*T+T-1)*qw, b*T*qw
		for c := range qw {
			if d := math.Abs(float64(mha[last+c] - full[last+c])); d > 1e-6 {
				t.Errorf("sequence %d, last position [%d]: causal %g, non-causal %g", b, c, mha[last+c], full[last+c])
			}
			if mha[first+c] != vr[first+c] {
				t.Errorf("sequence %d, position 0 [%d]: %g, want v's %g", b, c, mha[first+c], vr[first+c])
			}
		}
	}
}

// TestCausalAttentionRefusals: shapes that do not fit, and a backend
// without the kernel (the CUDA backend today), fail the tape with a reason.
func TestCausalAttentionRefusals(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := func(tp *engine.Tape, dims ...int) *engine.Tensor {
		return tp.Input(make([]float32, prod(dims)), dims...)
	}
	for name, build := range map[string]func(tp *engine.Tape){
		"kv heads not dividing heads": func(tp *engine.Tape) {
			tp.CausalAttention(in(tp, 1, 4, 12), in(tp, 1, 4, 6), in(tp, 1, 4, 6), 4, 3)
		},
		"head widths differ": func(tp *engine.Tape) {
			tp.CausalAttention(in(tp, 1, 4, 12), in(tp, 1, 4, 8), in(tp, 1, 4, 8), 4, 2)
		},
		"k and v lengths differ from q": func(tp *engine.Tape) {
			tp.CausalAttention(in(tp, 1, 4, 12), in(tp, 1, 3, 6), in(tp, 1, 3, 6), 4, 2)
		},
	} {
		tp := engine.NewTape(c)
		build(tp)
		if tp.Err() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, missing := range []string{engine.KernelCausalAttention, engine.KernelRoPE} {
		tp := engine.NewTape(&withoutKernel{Backend: c, missing: missing})
		if missing == engine.KernelRoPE {
			tp.RoPE(in(tp, 4, 4), in(tp, 4, 4), 1)
		} else {
			tp.CausalAttention(in(tp, 1, 4, 4), in(tp, 1, 4, 4), in(tp, 1, 4, 4), 2, 2)
		}
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no kernel %q", missing)) {
			t.Errorf("without kernel %q: error %v, want one naming it", missing, err)
		}
	}
}
