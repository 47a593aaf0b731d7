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

// seededIDs is n token ids in [0, vocab) from a seeded stream.
func seededIDs(seed uint64, n, vocab int) []int32 {
	r := rand.New(rand.NewPCG(seed, 27))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// refEmbedding: y[t] = table[ids[t]]; table: (V, d).
func refEmbedding(table []float64, ids []int32, d int) []float64 {
	y := make([]float64, 0, len(ids)*d)
	for _, id := range ids {
		y = append(y, table[int(id)*d:(int(id)+1)*d]...)
	}
	return y
}

// refCrossEntropy is mean_t [lse(h_t W^T) - h_t . w_target(t)] in float64,
// with the whole (T, V) logits (the engine never holds them).
func refCrossEntropy(h, w []float64, targets []int32, d int) float64 {
	T, V := len(targets), len(w)/d
	logits := make([]float64, V)
	var s float64
	for t := range T {
		for v := range V {
			var dot float64
			for j := range d {
				dot += h[t*d+j] * w[v*d+j]
			}
			logits[v] = dot
		}
		s += refLSE(logits, nil) - logits[targets[t]]
	}
	return s / float64(T)
}

// lmCases are the gradient cases of the language model's ops: the embedding
// (repeated ids must accumulate; an id never used gets a zero gradient) and
// the chunked cross-entropy (below one chunk, across a ragged chunk
// boundary, and tied: W is the embedding table, so its gradient sums both
// uses).
func lmCases() []gradCase {
	const V, d = 7, 4
	in := func(grad bool, dims ...int) testInput { return testInput{dims: dims, grad: grad} }
	repeated := []int32{3, 1, 3, 0, 3, 4, 1} // 3 three times, 1 twice, 2, 5 and 6 never
	xent := func(name string, T int) gradCase {
		targets := seededIDs(uint64(T), T, V)
		return gradCase{name: name, inputs: []testInput{in(true, T, d), in(true, V, d)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
				return tp.VocabCrossEntropy(xs[0], xs[1], targets)
			},
			ref: func(xs [][]float64) []float64 {
				return []float64{refCrossEntropy(xs[0], xs[1], targets, d)}
			}}
	}
	// Tied: h = E[ids] * X (X data, so that rows differ from table rows),
	// loss = xent(h, E, next ids).
	const Ttied = engine.CrossEntropyChunk + 5
	tiedIDs := seededIDs(11, Ttied+1, V)
	tied := gradCase{name: "VocabCrossEntropy/tied", inputs: []testInput{in(true, V, d), in(false, Ttied, d)},
		build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor {
			h := tp.Mul(tp.Embedding(xs[0], tiedIDs[:Ttied]), xs[1])
			return tp.VocabCrossEntropy(h, xs[0], tiedIDs[1:])
		},
		ref: func(xs [][]float64) []float64 {
			h := refEmbedding(xs[0], tiedIDs[:Ttied], d)
			for i := range h {
				h[i] *= xs[1][i]
			}
			return []float64{refCrossEntropy(h, xs[0], tiedIDs[1:], d)}
		}}
	return []gradCase{
		{name: "Embedding/repeated-ids", inputs: []testInput{in(true, V, d)},
			build: func(tp *engine.Tape, xs []*engine.Tensor) *engine.Tensor { return tp.Embedding(xs[0], repeated) },
			ref:   func(xs [][]float64) []float64 { return refEmbedding(xs[0], repeated, d) }},
		xent("VocabCrossEntropy/one-chunk", 5),
		xent("VocabCrossEntropy/chunks", 2*engine.CrossEntropyChunk+3),
		tied,
	}
}

func TestLMOpsForwardAndGradients(t *testing.T) {
	for _, be := range testBackends(t) {
		for _, tc := range lmCases() {
			t.Run(fmt.Sprintf("%s/%s", tc.name, be.BLAS().Name()[:5]), func(t *testing.T) {
				runGradCase(t, be, tc)
			})
		}
	}
}

// TestEmbeddingRepeatedIDsSum: the gradient of a table row is the sum of the
// output gradients of every token that looked it up, exactly (small
// integers), and zero for rows nobody looked up.
func TestEmbeddingRepeatedIDsSum(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tp := engine.NewTape(c)
	table := tp.Variable(make([]float32, 4*2), 4, 2)
	y := tp.Embedding(table, []int32{2, 0, 2, 2})
	w := tp.Input([]float32{1, 10, 2, 20, 3, 30, 4, 40}, 4, 2)
	if err := tp.Backward(tp.Sum(tp.Mul(y, w))); err != nil {
		t.Fatal(err)
	}
	got := table.Grad().ToHost()
	want := []float32{2, 20, 0, 0, 1 + 3 + 4, 10 + 30 + 40, 0, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("d table = %v, want %v", got, want)
		}
	}
}

// TestVocabCrossEntropyUniform: zero output weights give uniform logits, so
// the loss is log V whatever the hidden rows (over several chunks), and
// dW[v] = mean_t (1/V - [target_t = v]) h_t.
func TestVocabCrossEntropyUniform(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const T, V, d = 2*engine.CrossEntropyChunk + 1, 1000, 3
	r := rand.New(rand.NewPCG(5, 5))
	hh := make([]float32, T*d)
	for i := range hh {
		hh[i] = float32(r.NormFloat64())
	}
	targets := seededIDs(9, T, V)
	tp := engine.NewTape(c)
	h := tp.Variable(hh, T, d)
	w := tp.Variable(make([]float32, V*d), V, d)
	loss := tp.VocabCrossEntropy(h, w, targets)
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := float64(loss.Item()), math.Log(V); math.Abs(got-want) > 1e-5*want {
		t.Fatalf("loss of uniform logits = %.7g, want log %d = %.7g", got, V, want)
	}
	if err := tp.Backward(loss); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, V*d)
	for tk, tg := range targets {
		for j := range d {
			x := float64(hh[tk*d+j]) / T
			for v := range V {
				want[v*d+j] += x / V
			}
			want[int(tg)*d+j] -= x
		}
	}
	for i, g := range w.Grad().ToHost() {
		if math.Abs(float64(g)-want[i]) > 1e-5 {
			t.Fatalf("dW[%d] = %.7g, want %.7g", i, g, want[i])
		}
	}
	for i, g := range h.Grad().ToHost() {
		if g != 0 {
			t.Fatalf("dh[%d] = %g, want 0 (W is zero)", i, g)
		}
	}
}

// TestLMOpsRefuse: bad ids and shapes fail the tape naming the op and the
// value; a backend without the ops' kernels fails the tape naming the
// kernel (as the CUDA backend, which has none for them yet).
func TestLMOpsRefuse(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cases := []struct {
		name    string
		be      engine.Backend
		run     func(tp *engine.Tape, e *engine.Tensor)
		wantErr string
	}{
		{"id out of range", c, func(tp *engine.Tape, e *engine.Tensor) { tp.Embedding(e, []int32{0, 5}) },
			"Embedding: token 1: id 5 outside [0, 5)"},
		{"negative id", c, func(tp *engine.Tape, e *engine.Tensor) { tp.Embedding(e, []int32{-1}) },
			"token 0: id -1"},
		{"no ids", c, func(tp *engine.Tape, e *engine.Tensor) { tp.Embedding(e, nil) }, "no token ids"},
		{"target out of range", c, func(tp *engine.Tape, e *engine.Tensor) {
			tp.VocabCrossEntropy(tp.Embedding(e, []int32{1, 2}), e, []int32{3, 7})
		}, "VocabCrossEntropy: token 1: id 7 outside [0, 5)"},
		{"targets count", c, func(tp *engine.Tape, e *engine.Tensor) {
			tp.VocabCrossEntropy(tp.Embedding(e, []int32{1, 2}), e, []int32{3})
		}, "1 targets for 2 hidden rows"},
		{"width", c, func(tp *engine.Tape, e *engine.Tensor) {
			tp.VocabCrossEntropy(tp.Variable(make([]float32, 6), 2, 3), e, []int32{0, 1})
		}, "want (..., d) and (V, d)"},
		{"no embedding kernel", &withoutKernel{Backend: c, missing: engine.KernelEmbedding},
			func(tp *engine.Tape, e *engine.Tensor) { tp.Embedding(e, []int32{1}) }, `no kernel "embedding"`},
		{"no xent kernel", &withoutKernel{Backend: c, missing: engine.KernelCrossEntropy},
			func(tp *engine.Tape, e *engine.Tensor) {
				tp.VocabCrossEntropy(tp.Variable(make([]float32, 4), 2, 2), e, []int32{0, 1})
			}, `no kernel "xent"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := engine.NewTape(tc.be)
			e := tp.Variable(make([]float32, 5*2), 5, 2)
			tc.run(tp, e)
			if err := tp.Err(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestVocabCrossEntropyHoldsOneChunk: forward and backward over T tokens
// hold one (CrossEntropyChunk, V) block of logits, not (T, V): the step's
// activation peak stays under a quarter of the whole logits.
func TestVocabCrossEntropyHoldsOneChunk(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const T, V, d = 8 * engine.CrossEntropyChunk, 2000, 4
	r := rand.New(rand.NewPCG(6, 6))
	hh, ww := make([]float32, T*d), make([]float32, V*d)
	for i := range hh {
		hh[i] = float32(r.NormFloat64())
	}
	for i := range ww {
		ww[i] = float32(r.NormFloat64())
	}
	tp := engine.NewTape(c)
	loss := tp.VocabCrossEntropy(tp.Variable(hh, T, d), tp.Variable(ww, V, d), seededIDs(4, T, V))
	if err := tp.Backward(loss); err != nil {
		t.Fatal(err)
	}
	_, peak := tp.ArenaBytes()
	if whole := int64(T * V * 4); peak > whole/4 {
		t.Fatalf("activation peak %d bytes, whole logits %d: the logits are not chunked", peak, whole)
	}
	if pool := tp.GradPoolBytes(); pool > int64(T*V*4)/4 {
		t.Fatalf("gradient pool %d bytes: a (T, V) gradient was allocated", pool)
	}
}

// TestVocabCrossEntropyForwardOnly: a forward-only tape gives the same loss,
// bit for bit, without preparing the gradient (less arena), and refuses
// Backward.
func TestVocabCrossEntropyForwardOnly(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const T, V, d = engine.CrossEntropyChunk + 9, 300, 8
	r := rand.New(rand.NewPCG(7, 7))
	hh, ww := randHost(r, T*d), randHost(r, V*d)
	ids := seededIDs(5, T, V)
	run := func(forwardOnly bool) (float32, int64, error) {
		tp := engine.NewTape(c)
		tp.SetForwardOnly(forwardOnly)
		loss := tp.VocabCrossEntropy(tp.Variable(hh, T, d), tp.Variable(ww, V, d), ids)
		l := loss.Item()
		_, peak := tp.ArenaBytes()
		return l, peak, tp.Backward(loss)
	}
	lt, peakT, errT := run(false)
	lf, peakF, errF := run(true)
	if errT != nil {
		t.Fatalf("training tape: Backward: %v", errT)
	}
	if errF == nil || !strings.Contains(errF.Error(), "forward-only") {
		t.Errorf("forward-only tape: Backward gave %v, want a refusal", errF)
	}
	if lt != lf {
		t.Errorf("loss %v on a training tape, %v forward-only", lt, lf)
	}
	if prepared := int64((T + V) * d * 4); peakT-peakF < prepared {
		t.Errorf("arena peak %d training, %d forward-only: want the forward-only tape %d bytes (gh, gw) smaller", peakT, peakF, prepared)
	}
}
