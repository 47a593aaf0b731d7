package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// invModel is a small model that runs every kernel with a reduction or a GEMM split: a decoder
// block (embedding, RMSNorm, q/k/v projections, RoPE, grouped-query causal attention, SwiGLU
// through a LinearStack, the tied vocabulary cross-entropy over two row chunks) and a retrieval
// head on its output (masked attention, mean pooling, cosine scores, InfoNCE), with a
// sum-of-squares penalty, gradient clipping and AdamW.
type invModel struct {
	ps                              *engine.Params
	table, g1, g2, g3, wq, wkv, wo  *engine.Tensor
	gateUp, down, proj, rope, cands *engine.Tensor
}

// The model's sizes: B sequences of T tokens (B*T > engine.CrossEntropyChunk, so the
// cross-entropy takes two chunks of different heights), 4 query heads on 2 kv heads; the
// vocabulary's GEMMs are cut into column tiles (the logits) and row tiles (the table's gradient).
const (
	invB, invT, invD, invV      = 4, 157, 64, 1024
	invHeads, invKV, invF, invE = 4, 2, 190, 32
	invCands                    = 8
	invSteps                    = 2
)

func newInvModel(t *testing.T, be engine.Backend) *invModel {
	t.Helper()
	hd := invD / invHeads
	ps := engine.NewParams()
	m := &invModel{ps: ps}
	add := func(name string, dims ...int) *engine.Tensor {
		return ps.Add(name, dims, engine.DefaultDecay(name, dims))
	}
	m.table = add("embed.weight", invV, invD)
	m.g1, m.g2, m.g3 = add("norm1.weight", invD), add("norm2.weight", invD), add("norm3.weight", invD)
	m.wq = add("q.weight", invD, invD)
	wk, wv := add("k.weight", invKV*hd, invD), add("v.weight", invKV*hd, invD)
	m.wo = add("o.weight", invD, invD)
	gate, up := add("gate.weight", invF, invD), add("up.weight", invF, invD)
	m.down = add("down.weight", invD, invF)
	m.proj = add("proj.weight", invE, invD)
	m.wkv = ps.Stack("kv (stack)", wk, wv)
	m.gateUp = ps.Stack("gate_up (stack)", gate, up)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 17))
	for _, v := range ps.Views() {
		x := make([]float32, v.Size)
		for i := range x {
			if len(v.Shape) == 1 {
				x[i] = 1 + 0.1*float32(r.NormFloat64())
			} else {
				x[i] = float32(r.NormFloat64() / math.Sqrt(float64(v.Shape[1])))
			}
		}
		if err := v.Tensor.CopyFrom(x); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// step runs one training step on batch seed s and returns the loss, the gradient (before
// clipping) and the pre-clip gradient norm.
func (m *invModel) step(t *testing.T, tp *engine.Tape, opt *engine.AdamW, s uint64) (float32, []float32, float64) {
	t.Helper()
	hd := invD / invHeads
	r := rand.New(rand.NewPCG(s, 3))
	ids, targets := make([]int32, invB*invT), make([]int32, invB*invT)
	for i := range ids {
		ids[i], targets[i] = int32(r.IntN(invV)), int32(r.IntN(invV))
	}
	cands := make([]float32, invCands*invE)
	for i := range cands {
		cands[i] = float32(r.NormFloat64())
	}
	tab, err := engine.RoPETable(invT, hd, 10000)
	if err != nil {
		t.Fatal(err)
	}
	tp.Reset()
	rope := tp.Input(tab, invT, hd)
	x := tp.Embedding(m.table, ids) // (B*T, d)
	h := tp.RMSNorm(x, m.g1, engine.RMSNormEps)
	q := tp.RoPE(tp.Linear(h, m.wq), rope, invHeads)
	kv := make([]*engine.Tensor, 2)
	tp.LinearStack(h, m.wkv, kv)
	k := tp.RoPE(kv[0], rope, invKV)
	att := tp.CausalAttention(tp.Reshape(q, invB, invT, invD), tp.Reshape(k, invB, invT, invKV*hd),
		tp.Reshape(kv[1], invB, invT, invKV*hd), invHeads, invKV)
	o := tp.Linear(tp.Reshape(att, invB*invT, invD), m.wo)
	x = tp.Add(x, o)
	gu := make([]*engine.Tensor, 2)
	tp.LinearStack(tp.RMSNorm(x, m.g2, engine.RMSNormEps), m.gateUp, gu)
	x = tp.Add(x, tp.Linear(tp.SwiGLU(gu[0], gu[1]), m.down))
	xn := tp.RMSNorm(x, m.g3, engine.RMSNormEps)
	lm := tp.VocabCrossEntropy(xn, m.table, targets)

	set := tp.Reshape(xn, invB, invT, invD)
	mask := tp.KeyMask(invB, invT, []int{invT, 97, 130, 41})
	pooled := tp.MeanPool(tp.Attention(set, set, set, mask, invHeads), mask) // (B, d)
	scores := tp.CosineScores(tp.Linear(pooled, m.proj), tp.Input(cands, invCands, invE), 0.1)
	nce := tp.InfoNCE(scores, tp.PositiveMask(invB, invCands, [][]int{{0, 3}, {1}, {2, 5, 6}, {7}}))
	loss := tp.WeightedSum([]float32{1, 1, 1e-3}, lm, nce, tp.SumSquares(o))
	if err := tp.Backward(loss); err != nil {
		t.Fatal(err)
	}
	grad := m.ps.Grad().ToHost()
	norm := engine.ClipGradNorm(m.ps, 1)
	opt.Step()
	return loss.Item(), grad, norm
}

// invRun is what a few steps leave: per step the loss, gradient and norm, and the parameters.
type invRun struct {
	loss   []float32
	grads  [][]float32
	norms  []float64
	params []float32
}

func runInvModel(t *testing.T, lib *blas.Library, workers, minWork int) invRun {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: workers, BLAS: lib})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if minWork > 0 {
		be.SetMinWork(minWork)
	}
	m := newInvModel(t, be)
	opt, err := engine.NewAdamW(m.ps, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	tp := engine.NewTape(be)
	var run invRun
	for s := range uint64(invSteps) {
		l, g, n := m.step(t, tp, opt, s)
		run.loss, run.grads, run.norms = append(run.loss, l), append(run.grads, g), append(run.norms, n)
	}
	run.params = m.ps.Data().ToHost()
	return run
}

// firstDiff is the first index where a and b differ in their bits, -1 if none.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestWorkerCountInvariance: two training steps of invModel give bit-identical losses,
// gradients, gradient norms and parameters on 1, 2, 3 and 5 workers, with the default work
// threshold (what training runs) and with every kernel forced parallel, on gonum and on
// OpenBLAS: every split of work and every order of a floating-point sum follows the shapes,
// never the worker count, so `train` gives the same numbers on any number of cores.
func TestWorkerCountInvariance(t *testing.T) {
	libs := []*blas.Library{blas.Gonum()}
	if lib, err := blas.OpenOpenBLAS(); err == nil {
		libs = append(libs, lib)
	}
	for _, lib := range libs {
		for _, minWork := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/minWork=%d", lib.Name(), minWork), func(t *testing.T) {
				want := runInvModel(t, lib, 1, minWork)
				for _, w := range []int{2, 3, 5} {
					got := runInvModel(t, lib, w, minWork)
					for s := range got.loss {
						if math.Float32bits(got.loss[s]) != math.Float32bits(want.loss[s]) {
							t.Errorf("%d workers, step %d: loss %v, 1 worker %v", w, s, got.loss[s], want.loss[s])
						}
						if i := firstDiff(got.grads[s], want.grads[s]); i >= 0 {
							t.Errorf("%d workers, step %d: gradient element %d is %v, 1 worker %v", w, s, i, got.grads[s][i], want.grads[s][i])
						}
						if got.norms[s] != want.norms[s] {
							t.Errorf("%d workers, step %d: gradient norm %v, 1 worker %v", w, s, got.norms[s], want.norms[s])
						}
					}
					if i := firstDiff(got.params, want.params); i >= 0 {
						t.Errorf("%d workers: parameter %d is %v after the steps, 1 worker %v", w, i, got.params[i], want.params[i])
					}
				}
			})
		}
	}
}
