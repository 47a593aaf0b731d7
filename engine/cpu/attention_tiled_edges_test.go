package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// attnField is one named output or gradient of an attnCase.
type attnField struct {
	name string
	x    []float32
}

// fields returns the case's outputs and gradients.
func (a *attnCase) fields() []attnField {
	return []attnField{{"o", a.o.ToHost()}, {"lse", a.lse.ToHost()}, {"dq", a.dq.ToHost()}, {"dk", a.dk.ToHost()}, {"dv", a.dv.ToHost()}}
}

// edgeMask is a (B = 4, Nk) key mask whose batch elements hold every key, a prefix, keys that
// are not a prefix (the odd ones: gathered), and none.
func edgeMask(Nk int) []float32 {
	m := make([]float32, 4*Nk)
	for j := range Nk {
		m[j] = 1
		if j < (Nk+1)/2 {
			m[Nk+j] = 1
		}
		if j%2 == 1 {
			m[2*Nk+j] = 1
		}
	}
	return m
}

// poisonPadded overwrites the rows of x (B, Nk, h) whose keys mask leaves out with NaN, +-Inf
// and the largest float32 in turn: values that would show in any result they entered.
func poisonPadded(x, mask []float32, Nk, h int) {
	poison := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32}
	for r, m := range mask {
		if m == 0 {
			for c := range h {
				x[r*h+c] = poison[(r+c)%len(poison)]
			}
		}
	}
}

// rms is the root mean square of x's finite elements below 1e37 in magnitude (the padded rows'
// poison left out).
func rms(x []float32) float64 {
	s, n := 0.0, 0
	for _, v := range x {
		if f := math.Abs(float64(v)); f < 1e37 {
			s += f * f
			n++
		}
	}
	return math.Sqrt(s / float64(max(n, 1)))
}

// termScales are the typical magnitudes of the terms summed into each field of an attnCase:
// dq's are dS K with dS = P (dO V^T - rowsum(dO O)) / sqrt(dh), about rms(dO) rms(V) rms(K)
// whatever the result (with one key dq is exactly zero in exact arithmetic and both kernels
// return rounding noise of that size), dk's the same with Q, dv's P dO and o's P V.
func termScales(q, k, v, do []float32) map[string]float64 {
	return map[string]float64{"o": rms(v), "dq": rms(do) * rms(v) * rms(k), "dk": rms(do) * rms(v) * rms(q), "dv": rms(do)}
}

// compareAttn fails the test unless every output and gradient of got is within tol of want's,
// relative to the larger of the field's largest finite magnitude and its terms' scale (floor),
// NaN exactly where want has NaN, infinities equal, and padded keys' gradients (where mask is 0)
// exactly their values before the backward (start).
func compareAttn(t *testing.T, label string, got, want *attnCase, mask []float32, h int, tol float64, floor map[string]float64, start map[string][]float32) {
	t.Helper()
	wf := want.fields()
	for fi, g := range got.fields() {
		w := wf[fi]
		scale := floor[g.name]
		for _, v := range w.x {
			if f := math.Abs(float64(v)); !math.IsInf(f, 0) && !math.IsNaN(f) {
				scale = max(scale, f)
			}
		}
		for i := range w.x {
			gv, wv := float64(g.x[i]), float64(w.x[i])
			if math.IsNaN(gv) || math.IsNaN(wv) {
				if math.IsNaN(gv) != math.IsNaN(wv) {
					t.Fatalf("%s: %s[%d] = %g, BLAS %g: NaN must propagate as BLAS's does", label, g.name, i, gv, wv)
				}
				continue
			}
			if gv != wv && !(math.Abs(gv-wv) <= tol*scale) {
				t.Fatalf("%s: %s[%d] = %g, BLAS %g: differ by %.3g > %.3g", label, g.name, i, gv, wv, math.Abs(gv-wv), tol*scale)
			}
			if s0 := start[g.name]; mask != nil && s0 != nil && mask[i/h] == 0 && math.Float32bits(g.x[i]) != math.Float32bits(s0[i]) {
				t.Fatalf("%s: %s[%d] = %g, was %g: a padded key's gradient must be exactly zero", label, g.name, i, gv, s0[i])
			}
		}
	}
}

// attnInputs draws q, do (B, Nq, h) and k, v (B, Nk, h) from a standard normal times sq, sk,
// sv and 1.
func attnInputs(seed uint64, B, Nq, Nk, h int, sq, sk, sv float32) (q, k, v, do []float32) {
	r := rand.New(rand.NewPCG(41, seed))
	fill := func(n int, s float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = s * float32(r.NormFloat64())
		}
		return x
	}
	return fill(B*Nq*h, sq), fill(B*Nk*h, sk), fill(B*Nk*h, sv), fill(B*Nq*h, 1)
}

// runBoth runs one case on BLAS and on the tiled kernels, the gradients starting from the same
// nonzero values (the backward accumulates: self-attention adds q's, k's and v's gradients into
// one tensor), and compares them.
func runBoth(t *testing.T, c *Backend, label string, q, k, v, do, mask []float32, B, Nq, Nk, h, heads int) *attnCase {
	t.Helper()
	tp := engine.NewTape(c)
	r := rand.New(rand.NewPCG(41, uint64(B*Nq*Nk*h)))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	dq0, dk0, dv0 := fill(B*Nq*h), fill(B*Nk*h), fill(B*Nk*h)
	withGrads := func(a *attnCase) *attnCase {
		a.dq = tp.Input(append([]float32(nil), dq0...), B, Nq, h)
		a.dk = tp.Input(append([]float32(nil), dk0...), B, Nk, h)
		a.dv = tp.Input(append([]float32(nil), dv0...), B, Nk, h)
		return a
	}
	want := withGrads(newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads))
	got := withGrads(newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads))
	want.run(c, false)
	got.run(c, true)
	// exp's condition number is its argument: an error of e in a score is a relative error of e in
	// its probability, and the scores' errors grow with their size, rms(q) rms(k) (the scale
	// 1/sqrt(dh) cancels the sum's sqrt(dh)); fptol.Chain assumes stages of gain about one.
	gain := max(1, rms(q)*rms(k))
	compareAttn(t, label, got, want, mask, h, gain*fptol.Chain(4, max(Nq, Nk, h/heads), fptol.Float32), termScales(q, k, v, do),
		map[string][]float32{"dk": dk0, "dv": dv0})
	return got
}

// TestAttentionTiledEdgeShapes: the tiled kernels give BLAS's outputs and gradients (within
// fptol.Chain) at head widths 16, 48, 64 and 128, for every Nq of 1..7 and 13 and Nk of 0..7 and 13 (partial
// row blocks of the queries, of the keys, and of the transposed products' key rows), and at 257
// queries and/or keys; with no mask and with a mask whose batch elements hold all keys, a prefix,
// gathered keys and none, the padded K and V rows holding NaN, Inf and MaxFloat32, which must
// never reach a result (padded keys' gradients stay exactly zero); two heads, and one and three.
func TestAttentionTiledEdgeShapes(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const B, heads = 4, 2
	type shape struct{ Nq, Nk, dh int }
	var shapes []shape
	small := []int{1, 2, 3, 4, 5, 6, 7, 13}
	for _, dh := range []int{16, 48, 64, 128} {
		for _, nq := range small {
			for _, nk := range append([]int{0}, small...) {
				shapes = append(shapes, shape{nq, nk, dh})
			}
		}
	}
	for _, dh := range []int{16, 64} {
		shapes = append(shapes, shape{257, 257, dh}, shape{1, 257, dh}, shape{257, 1, dh}, shape{257, 13, dh})
	}
	for i, s := range shapes {
		h := heads * s.dh
		q, k, v, do := attnInputs(uint64(i), B, s.Nq, s.Nk, h, 1, 1, 1)
		runBoth(t, c, fmt.Sprintf("Nq %d Nk %d dh %d nomask", s.Nq, s.Nk, s.dh), q, k, v, do, nil, B, s.Nq, s.Nk, h, heads)
		mask := edgeMask(s.Nk)
		poisonPadded(k, mask, s.Nk, h)
		poisonPadded(v, mask, s.Nk, h)
		runBoth(t, c, fmt.Sprintf("Nq %d Nk %d dh %d masked", s.Nq, s.Nk, s.dh), q, k, v, do, mask, B, s.Nq, s.Nk, h, heads)
	}
	// One head (row stride h = dh: rows packed tight) and three (the middle head's rows start
	// mid-row).
	for _, nh := range []int{1, 3} {
		for _, dh := range []int{16, 48} {
			for _, n := range [][2]int{{1, 1}, {7, 13}, {13, 7}} {
				h := nh * dh
				q, k, v, do := attnInputs(uint64(100+n[0]*n[1]+dh), B, n[0], n[1], h, 1, 1, 1)
				mask := edgeMask(n[1])
				poisonPadded(k, mask, n[1], h)
				poisonPadded(v, mask, n[1], h)
				runBoth(t, c, fmt.Sprintf("Nq %d Nk %d dh %d heads %d", n[0], n[1], dh, nh), q, k, v, do, mask, B, n[0], n[1], h, nh)
			}
		}
	}
}

// TestAttentionTiledExtremeValues: scores large enough (rms 100) to make the softmax nearly
// one-hot (probabilities underflowing to exact zeros), values near float32's top (1e30) and tiny
// queries and keys (1e-18: products near the smallest normal) give BLAS's results.
func TestAttentionTiledExtremeValues(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const B, Nq, Nk, dh, heads = 4, 13, 11, 16, 2
	for _, sc := range []struct {
		name       string
		sq, sk, sv float32
	}{{"one-hot", 10, 10, 1}, {"huge values", 1, 1, 1e30}, {"tiny scores", 1e-18, 1e-18, 1}} {
		q, k, v, do := attnInputs(7, B, Nq, Nk, dh*heads, sc.sq, sc.sk, sc.sv)
		runBoth(t, c, sc.name, q, k, v, do, nil, B, Nq, Nk, dh*heads, heads)
		runBoth(t, c, sc.name+" masked", q, k, v, do, edgeMask(Nk), B, Nq, Nk, dh*heads, heads)
	}
}

// TestAttentionTiledNaNPropagates: a NaN in a real query or in a real key reaches exactly the
// outputs and gradients it reaches on BLAS (its query row's output, its head's key gradients,
// all of a head's outputs for a key), no more and no fewer.
func TestAttentionTiledNaNPropagates(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const B, Nq, Nk, dh, heads = 4, 13, 11, 16, 2
	h := dh * heads
	for _, masked := range []bool{false, true} {
		var mask []float32
		if masked {
			mask = edgeMask(Nk)
		}
		q, k, v, do := attnInputs(8, B, Nq, Nk, h, 1, 1, 1)
		q[(0*Nq+2)*h+3] = float32(math.NaN())      // batch 0, query 2, head 0
		k[(1*Nk+1)*h+dh+5] = float32(math.NaN())   // batch 1, key 1 (real in the prefix), head 1
		v[(2*Nk+3)*h+dh+7] = float32(math.NaN())   // batch 2, key 3 (real among the gathered), head 1
		do[(3*Nq+12)*h+dh+1] = float32(math.NaN()) // batch 3, query 12, head 1
		got := runBoth(t, c, fmt.Sprintf("masked %v", masked), q, k, v, do, mask, B, Nq, Nk, h, heads)
		if o := got.o.ToHost(); !math.IsNaN(float64(o[(0*Nq+2)*h])) {
			t.Fatalf("masked %v: the NaN query's output is %g, not NaN: the test injects nothing", masked, o[(0*Nq+2)*h])
		}
	}
}

// TestAttentionTiledBitsInvariant: the tiled kernels' bits do not depend on the worker count
// (1 or 3, every kernel forced parallel) nor on whether the sixteen-lane (AVX-512) or the
// eight-lane register block runs (on a machine without AVX-512 only the first is checked).
func TestAttentionTiledBitsInvariant(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: the tiled kernels are not used")
	}
	const B, Nq, Nk, dh, heads = 4, 13, 19, 48, 2
	h := dh * heads
	q, k, v, do := attnInputs(9, B, Nq, Nk, h, 1, 1, 1)
	mask := edgeMask(Nk)
	run := func(workers int, wide bool) []attnField {
		c, err := New(Config{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetMinWork(1)
		defer func(was bool) { hasAVX512 = was }(hasAVX512)
		hasAVX512 = wide
		a := newAttnCase(engine.NewTape(c), q, k, v, mask, do, B, Nq, Nk, h, heads)
		a.run(c, true)
		return a.fields()
	}
	same := func(label string, got, want []attnField) {
		for fi, f := range got {
			for i, x := range f.x {
				if math.Float32bits(x) != math.Float32bits(want[fi].x[i]) {
					t.Fatalf("%s: %s[%d] = %g, want %g", label, f.name, i, x, want[fi].x[i])
				}
			}
		}
	}
	want := run(1, false)
	same("3 workers, eight lanes", run(3, false), want)
	if !hasAVX512 {
		t.Log("no AVX-512: the sixteen-lane block is not compared")
		return
	}
	same("1 worker, sixteen lanes", run(1, true), want)
	same("3 workers, sixteen lanes", run(3, true), want)
}

// TestAttentionOddWidthUsesBLAS: a head width that is not whole blocks of tileCols (24) runs
// BLAS's kernels, bit for bit, and 16 runs the tiled ones.
func TestAttentionOddWidthUsesBLAS(t *testing.T) {
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.useTiledAttention(24) {
		t.Fatal("head width 24 would run the tiled kernels (whole 16-column blocks only)")
	}
	if c.useTiledAttention(16) != hasAVX2 {
		t.Fatalf("head width 16: tiled %v, want %v (AVX2 and FMA)", c.useTiledAttention(16), hasAVX2)
	}
	const B, Nq, Nk, dh, heads = 4, 7, 9, 24, 2
	h := dh * heads
	q, k, v, do := attnInputs(10, B, Nq, Nk, h, 1, 1, 1)
	mask := edgeMask(Nk)
	tp := engine.NewTape(c)
	want, got := newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads), newAttnCase(tp, q, k, v, mask, do, B, Nq, Nk, h, heads)
	want.run(c, false)
	c.attention(got.o, got.lse, got.q, got.k, got.v, got.mask, heads)
	c.attentionBackward(got.dq, got.dk, got.dv, got.do, got.q, got.k, got.v, got.mask, got.o, got.lse, heads)
	wf := want.fields()
	for fi, f := range got.fields() {
		for i, x := range f.x {
			if math.Float32bits(x) != math.Float32bits(wf[fi].x[i]) {
				t.Fatalf("%s[%d] = %g, BLAS %g: width 24 did not run the BLAS kernels", f.name, i, x, wf[fi].x[i])
			}
		}
	}
}

// TestAttentionNoQueries: attention over zero queries (a (B, 0, h) q, which Tape.Attention
// accepts) is a no-op on both kernels instead of slicing past the empty q: the gradients of k
// and v keep their values.
func TestAttentionNoQueries(t *testing.T) {
	c, err := New(Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const B, Nk, heads = 2, 5, 2
	for _, dh := range []int{16, 24} { // tiled (where AVX2) and BLAS
		h := dh * heads
		_, k, v, _ := attnInputs(11, B, 0, Nk, h, 1, 1, 1)
		a := newAttnCase(engine.NewTape(c), nil, k, v, edgeMask(Nk)[:B*Nk], nil, B, 0, Nk, h, heads)
		dk0 := a.dk.ToHost()
		c.attention(a.o, a.lse, a.q, a.k, a.v, a.mask, heads)
		c.attentionBackward(a.dq, a.dk, a.dv, a.do, a.q, a.k, a.v, a.mask, a.o, a.lse, heads)
		for i, x := range a.dk.ToHost() {
			if x != dk0[i] {
				t.Fatalf("dh %d: dk[%d] = %g, was %g: no query may reach a key", dh, i, x, dk0[i])
			}
		}
	}
}
