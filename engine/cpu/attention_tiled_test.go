package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/benchkit"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// attnCase is one attention forward and backward's tensors: inputs q (B, Nq, h), k, v (B, Nk,
// h), mask (B, Nk) or nil, the output gradient do (B, Nq, h), and the outputs and gradients the
// kernels write.
type attnCase struct {
	q, k, v, mask, do, o, lse, dq, dk, dv *engine.Tensor
	heads                                 int
}

func newAttnCase(tp *engine.Tape, q, k, v, mask, do []float32, B, Nq, Nk, h, heads int) *attnCase {
	zeros := func(dims ...int) *engine.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		return tp.Input(make([]float32, n), dims...)
	}
	a := &attnCase{q: tp.Input(q, B, Nq, h), k: tp.Input(k, B, Nk, h), v: tp.Input(v, B, Nk, h), do: tp.Input(do, B, Nq, h),
		o: zeros(B, Nq, h), lse: zeros(B, heads, Nq), dq: zeros(B, Nq, h), dk: zeros(B, Nk, h), dv: zeros(B, Nk, h), heads: heads}
	if mask != nil {
		a.mask = tp.Input(mask, B, Nk)
	}
	return a
}

// run runs the forward and the backward (which accumulates into the gradients) on the tiled or
// the BLAS kernels.
func (a *attnCase) run(c *Backend, tiled bool) {
	if tiled {
		c.attentionTiled(a.o, a.lse, a.q, a.k, a.v, a.mask, a.heads)
		c.attentionBackwardTiled(a.dq, a.dk, a.dv, a.do, a.q, a.k, a.v, a.mask, a.o, a.lse, a.heads)
		return
	}
	c.attentionBLAS(a.o, a.lse, a.q, a.k, a.v, a.mask, a.heads)
	c.attentionBackwardBLAS(a.dq, a.dk, a.dv, a.do, a.q, a.k, a.v, a.mask, a.o, a.lse, a.heads)
}

// TestAttentionTiledMatchesBLAS: the register-block kernels give BLAS's output, log-sum-exp and
// gradients, within the bound of two correct evaluations of the chain (scores, softmax,
// products: fptol.Chain of 4 stages over the longest inner dimension, against each head's
// largest magnitude), on partial row blocks (Nq 13), keys a prefix, scattered or none of a set,
// and head widths 16 and 32; padded keys get exactly zero gradient from both.
func TestAttentionTiledMatchesBLAS(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const B, Nq, Nk = 3, 13, 11
	masks := map[string][]float32{
		"nomask": nil,
		"mixed": append(append(append([]float32{}, ones(Nk)...),
			1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0), // scattered keys
			make([]float32, Nk)...), // an empty set
		"prefix": append(append(append([]float32{}, ones(7)...), make([]float32, 4)...), append(ones(Nk), ones(Nk)...)...),
	}
	for _, hh := range [][2]int{{32, 2}, {64, 2}} {
		h, heads := hh[0], hh[1]
		for name, mask := range masks {
			t.Run(fmt.Sprintf("%s/dh%d", name, h/heads), func(t *testing.T) {
				r := rand.New(rand.NewPCG(41, uint64(h)))
				fill := func(n int) []float32 {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					return x
				}
				q, k, v, do := fill(B*Nq*h), fill(B*Nk*h), fill(B*Nk*h), fill(B*Nq*h)
				tp := engine.NewTape(c)
				want, got := newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads), newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads)
				want.run(c, false)
				got.run(c, true)
				tol := fptol.Chain(4, max(Nq, Nk, h/heads), fptol.Float32)
				for _, f := range []struct {
					name      string
					got, want []float32
				}{{"o", got.o.ToHost(), want.o.ToHost()}, {"lse", got.lse.ToHost(), want.lse.ToHost()},
					{"dq", got.dq.ToHost(), want.dq.ToHost()}, {"dk", got.dk.ToHost(), want.dk.ToHost()}, {"dv", got.dv.ToHost(), want.dv.ToHost()}} {
					scale := 0.0
					for _, w := range f.want {
						if !math.IsInf(float64(w), 0) {
							scale = max(scale, math.Abs(float64(w)))
						}
					}
					for i := range f.want {
						g, w := float64(f.got[i]), float64(f.want[i])
						if (w == 0) != (g == 0) && (f.name == "dk" || f.name == "dv") {
							t.Fatalf("%s[%d] = %g, BLAS %g: a padded key's gradient must be exactly zero", f.name, i, g, w)
						}
						if g != w && !(math.Abs(g-w) <= tol*scale) {
							t.Fatalf("%s[%d] = %g, BLAS %g: differ by %.3g > %.3g", f.name, i, g, w, math.Abs(g-w), tol*scale)
						}
					}
				}
			})
		}
	}
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

// BenchmarkAttentionPaper runs one layer's attention forward and backward at the paper preset's
// shape (B 16, 257 rows, h 384, 12 heads) on the BLAS and the tiled kernels in turn (on an
// AVX-512 machine also on the eight-lane block an AVX2 machine runs), and reports the median
// process CPU time of each (on a shared machine CPU time drifts with the neighbours'
// load; alternating in one process pairs the two under the same load):
// go test ./engine/cpu -run '^$' -bench AttentionPaper -benchtime 20x.
func BenchmarkAttentionPaper(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	c, err := New(Config{Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const B, N, h, heads = 16, 257, 384, 12
	r := rand.New(rand.NewPCG(41, 9))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v, do := fill(B*N*h), fill(B*N*h), fill(B*N*h), fill(B*N*h)
	a := newAttnCase(engine.NewTape(c), q, k, v, nil, do, B, N, N, h, heads)
	defer func(was bool) { hasAVX512 = was }(hasAVX512)
	wide := hasAVX512
	var times [3][]time.Duration // BLAS, tiled, tiled on the eight-lane block (AVX-512 machines)
	for b.Loop() {
		for i, tiled := range []bool{false, true, true} {
			if i == 2 && !wide {
				continue
			}
			hasAVX512 = wide && i == 1
			t0 := benchkit.ProcessCPUTime()
			a.run(c, tiled)
			times[i] = append(times[i], benchkit.ProcessCPUTime()-t0)
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	blasMs, tiledMs := med(times[0]), med(times[1])
	b.ReportMetric(blasMs, "blas-cpu-ms")
	b.ReportMetric(tiledMs, "tiled-cpu-ms")
	b.ReportMetric(tiledMs/blasMs, "tiled/blas")
	if wide {
		b.ReportMetric(med(times[2]), "tiled-avx2-cpu-ms")
	}
}
