package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

func randHost(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestAttentionIgnoresPadding: real rows' outputs are bit-identical whatever
// the padded key/value rows (and padded query rows) hold, NaN and Inf
// included, and padded keys and values get exactly zero gradient; at head
// width 4 (the CPU's BLAS kernels) and 16 (its register-block kernels).
func TestAttentionIgnoresPadding(t *testing.T) {
	for _, h := range []int{8, 32} {
		testAttentionIgnoresPadding(t, h)
	}
}

func testAttentionIgnoresPadding(t *testing.T, h int) {
	const B, N, heads = 2, 5, 2
	for _, be := range testBackends(t) {
		for name, mask := range map[string][]float32{"prefix": prefixMask, "scattered": scatteredMask} {
			name = fmt.Sprintf("%s/h%d", name, h)
			r := rand.New(rand.NewPCG(5, 5))
			q, k, v := randHost(r, B*N*h), randHost(r, B*N*h), randHost(r, B*N*h)
			dOut := randHost(r, B*N*h)
			run := func(q, k, v []float32) (out, dq, dk, dv []float32) {
				tp := engine.NewTape(be)
				qt, kt, vt := tp.Variable(q, B, N, h), tp.Variable(k, B, N, h), tp.Variable(v, B, N, h)
				o := tp.Attention(qt, kt, vt, tp.Input(mask, B, N), heads)
				loss := tp.Sum(tp.Mul(tp.MaskRows(o, tp.Input(mask, B, N)), tp.Input(dOut, B, N, h)))
				if err := tp.Backward(loss); err != nil {
					t.Fatal(err)
				}
				return o.ToHost(), qt.Grad().ToHost(), kt.Grad().ToHost(), vt.Grad().ToHost()
			}
			o1, dq1, dk1, dv1 := run(q, k, v)
			// Keys and values may hold anything; queries any finite values
			// (a padded query row's output is ignored by the loss, so its
			// gradient is 0, and 0 * finite adds nothing).
			garbage := []float32{1e30, -1e30, float32(math.NaN()), float32(math.Inf(1)), 7}
			qGarbage := []float32{1e3, -1e3, 0, 7, -3e2}
			q2, k2, v2 := append([]float32{}, q...), append([]float32{}, k...), append([]float32{}, v...)
			for row, m := range mask {
				if m == 0 {
					for j := range h {
						q2[row*h+j] = qGarbage[(row+j)%len(qGarbage)]
						k2[row*h+j] = garbage[(row+j+1)%len(garbage)]
						v2[row*h+j] = garbage[(row+j+2)%len(garbage)]
					}
				}
			}
			o2, dq2, dk2, dv2 := run(q2, k2, v2)
			for row, m := range mask {
				for j := range h {
					i := row*h + j
					if m == 0 {
						if dk1[i] != 0 || dv1[i] != 0 || dk2[i] != 0 || dv2[i] != 0 || dq1[i] != 0 || dq2[i] != 0 {
							t.Fatalf("%s: padded row %d gets gradient dq=%g dk=%g dv=%g", name, row, dq2[i], dk2[i], dv2[i])
						}
						continue
					}
					if o1[i] != o2[i] || dq1[i] != dq2[i] || dk1[i] != dk2[i] || dv1[i] != dv2[i] {
						t.Fatalf("%s: real row %d changed with padding content: out %g vs %g, dq %g vs %g, dk %g vs %g",
							name, row, o1[i], o2[i], dq1[i], dq2[i], dk1[i], dk2[i])
					}
				}
			}
		}
	}
}

// TestLinearSkipsDataGradient: the input projection of data gets no
// gradient buffer while the weight's gradient is still accumulated, and
// Backward accumulates (two passes give twice the gradient).
func TestLinearSkipsDataGradient(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	w := ps.Add("in_proj.weight", []int{3, 4}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 9))
	wv, xv := randHost(r, 12), randHost(r, 8)
	if err := w.CopyFrom(wv); err != nil {
		t.Fatal(err)
	}
	tp := engine.NewTape(be)
	var first []float32
	for pass := 1; pass <= 2; pass++ {
		tp.Reset()
		x := tp.Input(xv, 2, 4)
		if err := tp.Backward(tp.Sum(tp.Linear(x, w))); err != nil {
			t.Fatal(err)
		}
		if x.Grad() != nil {
			t.Fatal("data input received a gradient buffer")
		}
		g := w.Grad().ToHost()
		// d sum(x W^T) / dW[o, i] = sum_rows x[r, i], the same for every o.
		for o := range 3 {
			for i := range 4 {
				want := float32(pass) * (xv[i] + xv[4+i])
				if math.Abs(float64(g[o*4+i]-want)) > 1e-5 {
					t.Fatalf("pass %d: dW[%d,%d] = %g, want %g", pass, o, i, g[o*4+i], want)
				}
			}
		}
		first = g
	}
	ps.ZeroGrad()
	for i, v := range w.Grad().ToHost() {
		if v != 0 {
			t.Fatalf("ZeroGrad left %g at %d (had %g)", v, i, first[i])
		}
	}
}

// TestArenaReusedAcrossSteps: after the first step neither the activation
// arena nor the gradient pool grows, and tensors made from slabs are reused.
func TestArenaReusedAcrossSteps(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	w1 := ps.Add("l1.weight", []int{16, 8}, true)
	n1 := ps.Add("n1.weight", []int{16}, false)
	w2 := ps.Add("l2.weight", []int{4, 16}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	for _, p := range []*engine.Tensor{w1, n1, w2} {
		_ = p.CopyFrom(randHost(r, p.Size()))
	}
	x := randHost(r, 2*5*8)
	tp := engine.NewTape(be)
	step := func() {
		tp.Reset()
		in := tp.Input(x, 2, 5, 8)
		hdn := tp.RMSNorm(tp.Linear(in, w1), n1, engine.RMSNormEps)
		a := tp.Attention(hdn, hdn, hdn, tp.KeyMask(2, 5, []int{5, 3}), 2)
		loss := tp.SumSquares(tp.Linear(tp.Add(a, hdn), w2))
		if err := tp.Backward(loss); err != nil {
			t.Fatal(err)
		}
	}
	step()
	held, peak := tp.ArenaBytes()
	pool := tp.GradPoolBytes()
	for range 3 {
		step()
	}
	held2, peak2 := tp.ArenaBytes()
	if held2 != held || peak2 != peak || tp.GradPoolBytes() != pool {
		t.Fatalf("memory grew after warm-up: arena %d->%d (peak %d->%d), grad pool %d->%d",
			held, held2, peak, peak2, pool, tp.GradPoolBytes())
	}
	if engine.TensorSlabs(tp) != 1 {
		t.Fatalf("tensor slabs grew to %d", engine.TensorSlabs(tp))
	}
}

// TestStickyErrors: a shape mismatch is recorded with the op's name, later
// ops do nothing, Backward reports it and Reset clears it.
func TestStickyErrors(t *testing.T) {
	be := testBackends(t)[0]
	tp := engine.NewTape(be)
	a := tp.Variable(make([]float32, 6), 2, 3)
	b := tp.Input(make([]float32, 8), 2, 4)
	y := tp.Linear(a, b) // weight (2, 4) needs x (..., 4)
	z := tp.Sum(tp.Add(y, a))
	err := tp.Backward(z)
	if err == nil || !strings.Contains(err.Error(), "Linear") {
		t.Fatalf("want an error naming Linear, got %v", err)
	}
	if z.Item() != 0 {
		t.Fatalf("placeholder holds %g", z.Item())
	}
	tp.Reset()
	if tp.Err() != nil {
		t.Fatal("Reset kept the error")
	}
	if tp.Input(make([]float32, 5), 2, 3); tp.Err() == nil {
		t.Fatal("Input with the wrong number of values gave no error")
	}
}

func TestParamsTable(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	ps.Add("a.weight", []int{2, 3}, true)
	ps.Add("b", []int{4}, false)
	ps.Add("a.weight", []int{1}, false)
	if err := ps.Alloc(be); err == nil || !strings.Contains(err.Error(), `"a.weight" registered twice`) {
		t.Fatalf("duplicate name: got %v", err)
	}
	ps = engine.NewParams()
	a := ps.Add("a.weight", []int{2, 3}, true)
	b := ps.Add("b", []int{4}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	vs := ps.Views()
	if ps.Len() != 10 || vs[1].Offset != 6 || vs[1].Size != 4 || !vs[0].Decay || vs[1].Decay {
		t.Fatalf("table wrong: %+v", vs)
	}
	_ = a.CopyFrom([]float32{1, 2, 3, 4, 5, 6})
	_ = b.CopyFrom([]float32{7, 8, 9, 10})
	all := ps.Data().ToHost()
	for i, v := range all {
		if v != float32(i+1) {
			t.Fatalf("flat buffer %v: views do not tile it in order", all)
		}
	}
	if got, ok := ps.Lookup("b"); !ok || got != b {
		t.Fatal("Lookup(b) failed")
	}
	if err := ps.Alloc(be); err == nil {
		t.Fatal("second Alloc accepted")
	}
	for _, c := range []struct {
		name  string
		shape []int
		want  bool
	}{
		{"layers.3.attn.q_proj.weight", []int{384, 384}, true},
		{"in_proj.weight", []int{384, 4096}, true},
		{"layers.3.mlp.down_proj.weight", []int{384, 1536}, true},
		{"mix_head.q.weight", []int{384, 384}, true},
		{"layers.3.attn_norm.weight", []int{384}, false},
		{"dec.layers.0.cross_norm.weight", []int{384}, false},
		{"cls", []int{384}, false},
		{"slots", []int{64, 384}, false},
		{"log_tau", []int{1}, false},
	} {
		if got := engine.DefaultDecay(c.name, c.shape); got != c.want {
			t.Errorf("DefaultDecay(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAdamWMatchesHandComputation follows two steps of AdamW by hand for a
// decayed and an undecayed parameter, with a schedule.
func TestAdamWMatchesHandComputation(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	w := ps.Add("w.weight", []int{2}, true)
	n := ps.Add("norm.weight", []int{1}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	_ = w.CopyFrom([]float32{1, -2})
	_ = n.CopyFrom([]float32{0.5})
	const lr0, b1, b2, eps, wd = 0.1, 0.9, 0.99, 1e-8, 0.05
	opt, err := engine.NewAdamW(ps, engine.AdamWConfig{LR: 99, Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd})
	if err != nil {
		t.Fatal(err)
	}
	opt.SetSchedule(func(step int) float32 { return lr0 / float32(step) })
	grads := [][]float64{{0.3, -0.4, 2}, {-0.1, 0.2, -1}}
	p := []float64{1, -2, 0.5}
	m, v := make([]float64, 3), make([]float64, 3)
	for s, g := range grads {
		_ = ps.Grad().CopyFrom([]float32{float32(g[0]), float32(g[1]), float32(g[2])})
		opt.Step()
		for i, v := range ps.Grad().ToHost() {
			if v != 0 {
				t.Fatalf("step %d left gradient %d = %g", s+1, i, v)
			}
		}
		lr := lr0 / float64(s+1)
		for i := range p {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			mh := m[i] / (1 - math.Pow(b1, float64(s+1)))
			vh := v[i] / (1 - math.Pow(b2, float64(s+1)))
			if i < 2 { // decayed
				p[i] -= lr * wd * p[i]
			}
			p[i] -= lr * mh / (math.Sqrt(vh) + eps)
		}
		got := ps.Data().ToHost()
		for i := range p {
			if math.Abs(float64(got[i])-p[i]) > 1e-6 {
				t.Fatalf("step %d: param %d = %.8g, hand computation %.8g", s+1, i, got[i], p[i])
			}
		}
		if math.Abs(float64(opt.LR())-lr) > 1e-7*lr {
			t.Fatalf("step %d used lr %g, schedule says %g", s+1, opt.LR(), lr)
		}
	}
	// State round trip: a fresh optimiser given the state continues identically.
	st := opt.State()
	opt2, _ := engine.NewAdamW(ps, engine.AdamWConfig{LR: 0.01, Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd})
	if err := opt2.SetState(st); err != nil {
		t.Fatal(err)
	}
	st2 := opt2.State()
	if st2.Step != 2 || st2.M["norm.weight"][0] != st.M["norm.weight"][0] || st2.V["w.weight"][1] != st.V["w.weight"][1] {
		t.Fatalf("state round trip: %+v vs %+v", st2, st)
	}
	delete(st.M, "w.weight")
	if err := opt2.SetState(st); err == nil || !strings.Contains(err.Error(), "w.weight") {
		t.Fatalf("state without w.weight accepted: %v", err)
	}
}

func TestClipGradNorm(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	ps.Add("a", []int{2}, false)
	ps.Add("b", []int{2}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	_ = ps.Grad().CopyFrom([]float32{3, 0, 0, 4}) // norm 5
	if n := engine.ClipGradNorm(ps, 10); math.Abs(n-5) > 1e-9 {
		t.Fatalf("norm %g, want 5", n)
	}
	if g := ps.Grad().ToHost(); g[0] != 3 || g[3] != 4 {
		t.Fatalf("clipping below the limit changed the gradient: %v", g)
	}
	if n := engine.ClipGradNorm(ps, 1); math.Abs(n-5) > 1e-9 {
		t.Fatalf("pre-clip norm %g, want 5", n)
	}
	if n := engine.GradNorm(ps); math.Abs(n-1) > 1e-6 {
		t.Fatalf("norm after clipping to 1 is %g", n)
	}
	if g := ps.Grad().ToHost(); math.Abs(float64(g[0])-0.6) > 1e-6 || math.Abs(float64(g[3])-0.8) > 1e-6 {
		t.Fatalf("clipping did not scale uniformly: %v", g)
	}
}

func TestCheckFiniteNamesTensor(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	ps.Add("layers.0.attn.q_proj.weight", []int{2, 2}, true)
	ps.Add("layers.0.mlp.up_proj.weight", []int{2, 2}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	if err := engine.CheckFinite(ps); err != nil {
		t.Fatalf("zero parameters reported: %v", err)
	}
	g := make([]float32, 8)
	g[6] = float32(math.NaN())
	_ = ps.Grad().CopyFrom(g)
	var nf *engine.NonFiniteError
	if err := engine.CheckFinite(ps); !errors.As(err, &nf) || err.Error() != "tensor layers.0.mlp.up_proj.weight.grad has NaN" {
		t.Fatalf("got %v, want the up_proj gradient named", err)
	}
	ps.ZeroGrad()
	d := make([]float32, 8)
	d[1] = float32(math.Inf(-1))
	_ = ps.Data().CopyFrom(d)
	if err := engine.CheckFinite(ps); !errors.As(err, &nf) || nf.Tensor != "layers.0.attn.q_proj.weight" || nf.Value != "Inf" {
		t.Fatalf("got %v, want q_proj named with Inf", err)
	}
	tp := engine.NewTape(be)
	l := tp.Log(tp.Input([]float32{0, 1}, 2))
	if err := engine.CheckFiniteTensor(l); err == nil {
		t.Fatal("log(0) reported finite")
	}
}

// TestBackendsAgree: the same two-layer step on OpenBLAS and on the gonum
// fallback gives the same loss and gradients to float32 round-off.
func TestBackendsAgree(t *testing.T) {
	bes := testBackends(t)
	if len(bes) < 2 {
		t.Skip("OpenBLAS not available")
	}
	var results [][]float32
	for _, be := range bes {
		ps := engine.NewParams()
		w1 := ps.Add("l1.weight", []int{32, 16}, true)
		w2 := ps.Add("l2.weight", []int{8, 32}, true)
		if err := ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
		// Weights of scale 1/sqrt(fan-in) keep the softmaxes well
		// conditioned, so round-off is not amplified.
		r := rand.New(rand.NewPCG(4, 4))
		wv1, wv2 := randHost(r, w1.Size()), randHost(r, w2.Size())
		for i := range wv1 {
			wv1[i] *= 0.25
		}
		for i := range wv2 {
			wv2[i] *= 0.18
		}
		_ = w1.CopyFrom(wv1)
		_ = w2.CopyFrom(wv2)
		tp := engine.NewTape(be)
		x := tp.Input(randHost(r, 3*7*16), 3, 7, 16)
		h := tp.Linear(x, w1)
		a := tp.Attention(h, h, h, tp.KeyMask(3, 7, []int{7, 4, 1}), 4)
		y := tp.TakeRow(tp.Linear(tp.SwiGLU(a, h), w2), 0)
		loss := tp.InfoNCE(y, tp.PositiveMask(3, 8, [][]int{{0}, {1, 2}, {7}}))
		if err := tp.Backward(loss); err != nil {
			t.Fatal(err)
		}
		results = append(results, append([]float32{loss.Item()}, ps.Grad().ToHost()...))
	}
	for i := range results[0] {
		a, b := float64(results[0][i]), float64(results[1][i])
		if math.Abs(a-b) > 1e-5+1e-4*math.Abs(a) {
			t.Fatalf("element %d: gonum %g, OpenBLAS %g", i, a, b)
		}
	}
}

// TestStepIsBitReproducible: the same step run twice (on two workers, with
// dynamic scheduling of chunks) gives bit-identical loss, gradients and
// gradient norm: reductions do not depend on which worker ran what.
func TestStepIsBitReproducible(t *testing.T) {
	for _, be := range testBackends(t) {
		run := func() ([]float32, float64) {
			ps := engine.NewParams()
			w1 := ps.Add("l1.weight", []int{24, 16}, true)
			g := ps.Add("norm.weight", []int{24}, false)
			if err := ps.Alloc(be); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(8, 8))
			_ = w1.CopyFrom(randHost(r, w1.Size()))
			_ = g.CopyFrom(randHost(r, g.Size()))
			tp := engine.NewTape(be)
			x := tp.Input(randHost(r, 4*9*16), 4, 9, 16)
			h := tp.RMSNorm(tp.Linear(x, w1), g, engine.RMSNormEps)
			a := tp.Attention(h, h, h, tp.KeyMask(4, 9, []int{9, 5, 2, 7}), 3)
			loss := tp.SumSquares(tp.MeanPool(tp.RMSNorm(tp.Add(a, h), g, engine.RMSNormEps), nil))
			if err := tp.Backward(loss); err != nil {
				t.Fatal(err)
			}
			return append([]float32{loss.Item()}, ps.Grad().ToHost()...), engine.GradNorm(ps)
		}
		a, na := run()
		for range 3 {
			b, nb := run()
			if na != nb {
				t.Fatalf("gradient norm %v then %v", na, nb)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("element %d: %v then %v", i, a[i], b[i])
				}
			}
		}
	}
}

// TestNoActivationAllocationAfterWarmUp: after the first step, a step
// allocates only small bookkeeping on the Go heap (closures, the masks'
// host slices), not activations or gradients: the bytes allocated per step
// stay small and do not grow with the sizes of the tensors.
func TestNoActivationAllocationAfterWarmUp(t *testing.T) {
	bes := testBackends(t)
	be := bes[len(bes)-1]
	if !be.BLAS().IsOpenBLAS() {
		t.Skip("gonum's SGEMM allocates per call; the bound is for the engine's own memory")
	}
	perStep := func(N int) uint64 {
		ps := engine.NewParams()
		w1 := ps.Add("l1.weight", []int{64, 32}, true)
		n1 := ps.Add("n1.weight", []int{64}, false)
		if err := ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(2, 2))
		_ = w1.CopyFrom(randHost(r, w1.Size()))
		_ = n1.CopyFrom(randHost(r, n1.Size()))
		x := randHost(r, 4*N*32)
		opt, _ := engine.NewAdamW(ps, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		tp := engine.NewTape(be)
		step := func() {
			tp.Reset()
			in := tp.Input(x, 4, N, 32)
			h := tp.RMSNorm(tp.Linear(in, w1), n1, engine.RMSNormEps)
			a := tp.Attention(h, h, h, tp.KeyMask(4, N, []int{N, N / 2, N / 3, 1}), 4)
			loss := tp.SumSquares(tp.SwiGLU(tp.Add(a, h), h))
			if err := tp.Backward(loss); err != nil {
				t.Fatal(err)
			}
			engine.ClipGradNorm(ps, 1)
			opt.Step()
		}
		step()
		// TotalAlloc counts the whole process, so a parallel test or the runtime allocating
		// during a window inflates it: the least of three windows is this code's own figure.
		best := uint64(math.MaxUint64)
		for range 3 {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for range 5 {
				step()
			}
			runtime.ReadMemStats(&m1)
			best = min(best, (m1.TotalAlloc-m0.TotalAlloc)/5)
		}
		return best
	}
	small, large := perStep(16), perStep(256)
	// At N=256 one activation is 4*256*64*4 bytes = 256 KiB and a step makes
	// about twenty of them and as many gradients (5 MiB or more); what is
	// allocated instead is bookkeeping: the tape's closures, the masks' host
	// slices, purego's per-call argument boxing (about 150 bytes a GEMM).
	if large > 1<<20 || large > 2*small+64<<10 {
		t.Fatalf("bytes allocated per step: %d at N=16, %d at N=256", small, large)
	}
}

// TestAdamWZeroBetasAreUsed: Beta1 = 0 (no momentum) and Beta2 = 0 (no second-moment history) are
// legitimate settings, not "unset": after one step the moments are g and g^2 exactly, and the
// second step follows the formula with those betas.
func TestAdamWZeroBetasAreUsed(t *testing.T) {
	be := testBackends(t)[0]
	for _, betas := range [][2]float64{{0, 0.999}, {0.9, 0}, {0, 0}} {
		b1, b2 := betas[0], betas[1]
		ps := engine.NewParams()
		w := ps.Add("w", []int{2}, false)
		if err := ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
		_ = w.CopyFrom([]float32{1, -2})
		const lr, eps = 0.1, 1e-8
		opt, err := engine.NewAdamW(ps, engine.AdamWConfig{LR: lr, Beta1: float32(b1), Beta2: float32(b2), Eps: eps})
		if err != nil {
			t.Fatalf("betas %v: %v", betas, err)
		}
		grads := [][]float64{{0.5, -0.25}, {-2, 1}}
		p := []float64{1, -2}
		m, v := make([]float64, 2), make([]float64, 2)
		for s, g := range grads {
			_ = ps.Grad().CopyFrom([]float32{float32(g[0]), float32(g[1])})
			opt.Step()
			for i := range p {
				m[i] = b1*m[i] + (1-b1)*g[i]
				v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
				mh := m[i] / (1 - math.Pow(b1, float64(s+1)))
				vh := v[i] / (1 - math.Pow(b2, float64(s+1)))
				p[i] -= lr * mh / (math.Sqrt(vh) + eps)
			}
			st := opt.State()
			got := ps.Data().ToHost()
			for i := range p {
				if math.Abs(float64(st.M["w"][i])-m[i]) > 1e-6 || math.Abs(float64(st.V["w"][i])-v[i]) > 1e-6 {
					t.Fatalf("betas %v, step %d: moments m %v v %v, formula %v %v", betas, s+1, st.M["w"], st.V["w"], m, v)
				}
				if math.Abs(float64(got[i])-p[i]) > 1e-6 {
					t.Fatalf("betas %v, step %d: param %d = %.8g, formula %.8g", betas, s+1, i, got[i], p[i])
				}
			}
		}
	}
	ps := engine.NewParams()
	ps.Add("w", []int{1}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []engine.AdamWConfig{
		{LR: 1, Beta1: 1, Beta2: 0.9, Eps: 1e-8}, {LR: 1, Beta1: 0.9, Beta2: -0.1, Eps: 1e-8},
		{LR: 1, Beta1: 0.9, Beta2: 0.99, Eps: 0},
	} {
		if _, err := engine.NewAdamW(ps, cfg); err == nil {
			t.Errorf("NewAdamW accepted %+v", cfg)
		}
	}
}

// TestRMSNormEpsKnownAnswer: on a row whose mean square (2.5e-6) is comparable to eps, eps 1e-6
// and 1e-5 give y = x w / sqrt(2.5e-6 + eps) each, so the outputs differ by the factor
// sqrt(12.5 / 3.5); eps 0 (or negative) is an error.
func TestRMSNormEpsKnownAnswer(t *testing.T) {
	be := testBackends(t)[0]
	x := []float32{1e-3, -1e-3, 2e-3, -2e-3}
	w := []float32{1, 2, 0.5, -1}
	out := map[float32][]float32{}
	for _, eps := range []float32{1e-6, 1e-5} {
		tp := engine.NewTape(be)
		y := tp.RMSNorm(tp.Input(x, 1, 4), tp.Input(w, 4), eps)
		if err := tp.Err(); err != nil {
			t.Fatal(err)
		}
		got := y.ToHost()
		inv := 1 / math.Sqrt(2.5e-6+float64(eps))
		for j := range x {
			want := float64(x[j]) * float64(w[j]) * inv
			if math.Abs(float64(got[j])-want) > 1e-6*math.Abs(want) {
				t.Fatalf("eps %g: y[%d] = %.8g, formula %.8g", eps, j, got[j], want)
			}
		}
		out[eps] = got
	}
	ratio := math.Sqrt(12.5 / 3.5)
	for j := range x {
		if r := float64(out[1e-6][j]) / float64(out[1e-5][j]); math.Abs(r-ratio) > 1e-5 {
			t.Fatalf("y[%d] at eps 1e-6 over y at 1e-5 = %.7g, want sqrt(12.5/3.5) = %.7g", j, r, ratio)
		}
	}
	for _, eps := range []float32{0, -1e-5, float32(math.Inf(1))} {
		tp := engine.NewTape(be)
		tp.RMSNorm(tp.Input(x, 1, 4), tp.Input(w, 4), eps)
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), "eps") {
			t.Errorf("eps %g: error %v, want one naming eps", eps, err)
		}
	}
}

// TestCPUCountsHostReads: every call that hands device data to the host (Item, ToHost, CopyTo,
// SumSquaresHost and what uses it) counts once; kernels and uploads do not count.
func TestCPUCountsHostReads(t *testing.T) {
	be := testBackends(t)[0]
	tp := engine.NewTape(be)
	x := tp.Input([]float32{1, 2, 3}, 3)
	s := tp.Sum(tp.Square(x))
	before := be.HostReads()
	if s.Item() != 14 {
		t.Fatalf("sum of squares %v", s.Item())
	}
	_ = x.ToHost()
	_ = x.CopyTo(make([]float32, 3))
	_ = be.SumSquaresHost(x)
	if n := be.HostReads() - before; n != 4 {
		t.Fatalf("%d host reads counted, want 4", n)
	}
}

// TestTapeRejectsForeignTensors: a tensor of one backend handed to the tape
// of another fails the op through the tape's error (naming the op, the
// tensor and both backends) instead of a kernel reading memory it does not
// own; later ops return placeholders and Backward reports the error.
func TestTapeRejectsForeignTensors(t *testing.T) {
	mine, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := cpu.New(cpu.Config{Workers: 2, BLAS: blas.Gonum()})
	if err != nil {
		t.Fatal(err)
	}
	ps := engine.NewParams()
	w := ps.Add("proj.weight", []int{3, 4}, true)
	if err := ps.Alloc(theirs); err != nil {
		t.Fatal(err)
	}
	tp := engine.NewTape(mine)
	x := tp.Variable(make([]float32, 8), 2, 4)
	loss := tp.Sum(tp.Linear(x, w))
	err = tp.Backward(loss)
	if err == nil || tp.Err() == nil {
		t.Fatal("a parameter of another backend was accepted")
	}
	t.Log(err)
	for _, want := range []string{"Linear", "proj.weight", mine.Name(), theirs.Name()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if loss.Item() != 0 {
		t.Errorf("placeholder holds %g", loss.Item())
	}

	// Two backends of the same kind and name: the error says they differ.
	twin, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp2 := engine.NewTape(twin)
	tp2.Add(tp2.Input(make([]float32, 8), 2, 4), x)
	if err := tp2.Err(); err == nil || !strings.Contains(err.Error(), "another backend") || !strings.Contains(err.Error(), "Add") {
		t.Errorf("activation of a twin backend: error %v", err)
	}
}

// TestTapeRejectsUnallocatedParam: a parameter used before Params.Alloc has
// no storage; the op fails with an error saying so rather than panicking.
func TestTapeRejectsUnallocatedParam(t *testing.T) {
	be := testBackends(t)[0]
	ps := engine.NewParams()
	w := ps.Add("early.weight", []int{3, 4}, true)
	tp := engine.NewTape(be)
	y := tp.Linear(tp.Input(make([]float32, 8), 2, 4), w)
	err := tp.Err()
	if err == nil || !strings.Contains(err.Error(), "early.weight") || !strings.Contains(err.Error(), "no storage") || !strings.Contains(err.Error(), "Linear") {
		t.Fatalf("unallocated parameter: error %v", err)
	}
	if y.Item() != 0 {
		t.Errorf("placeholder holds %g", y.Item())
	}
	if err := w.CopyFrom(make([]float32, 12)); err == nil {
		t.Error("CopyFrom into an unallocated parameter gave no error")
	}
}
