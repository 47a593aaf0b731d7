package cuda

// Cross-check cases of the language model's fused kernels (kernels/lm.cu):
// RoPE, CausalAttention, Embedding and the chunked vocabulary cross-entropy,
// each forward and backward against the CPU, plus LMTape, a small decoder
// step through the tape (the cross-entropy's chunked GEMMs, tied
// embeddings, grouped-query heads) comparing the loss and every gradient.
// They are op cases of runOpCases, so TestBackendCrossCheck{FP32,TF32,BF16}
// run them at every precision; a device backend without lm.ptx lacks the
// kernels and the cases are skipped with a log line (see lmCaseKernels).

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
)

// lmKernelSet is a backend's language-model kernels.
type lmKernelSet struct {
	rope   engine.RoPEKernels
	causal engine.CausalAttentionKernels
	embed  engine.EmbeddingKernels
	xent   engine.CrossEntropyKernels
}

// lmKernelsOf looks up be's language-model kernels.
func lmKernelsOf(be engine.Backend) lmKernelSet {
	return lmKernelSet{
		rope:   fused[engine.RoPEKernels](be, engine.KernelRoPE),
		causal: fused[engine.CausalAttentionKernels](be, engine.KernelCausalAttention),
		embed:  fused[engine.EmbeddingKernels](be, engine.KernelEmbedding),
		xent:   fused[engine.CrossEntropyKernels](be, engine.KernelCrossEntropy),
	}
}

// hasLMKernels reports whether be registers all four language-model kernels.
func hasLMKernels(be engine.Backend) bool {
	for _, k := range lmCaseKernels {
		if be.Kernel(k) == nil {
			return false
		}
	}
	return true
}

// lmCaseKernels are the kernels the LM op cases need (any one missing skips
// them all).
var lmCaseKernels = []string{engine.KernelRoPE, engine.KernelCausalAttention, engine.KernelEmbedding, engine.KernelCrossEntropy}

// opCaseNeeds are the optional fused kernels (optionalKernels) an op case
// calls, by case name: runOpCases skips the case, with a log line, when the
// device backend lacks one.
var opCaseNeeds = map[string][]string{
	"RoPE": lmCaseKernels, "CausalAttention": lmCaseKernels, "Embedding": lmCaseKernels,
	"CrossEntropy": lmCaseKernels, "LMTape": lmCaseKernels,
	"SpanAttention": {engine.KernelSpanAttention},
}

// ropeTable is engine.RoPETable or a failed check.
func (h *harness) ropeTable(T, hd int) []float32 {
	tab, err := engine.RoPETable(T, hd, 10000)
	if err != nil {
		h.errorf("RoPETable: %v", err)
	}
	return tab
}

func caseRoPE(h *harness) {
	type ropeCase struct {
		B, T, heads, hd int
		threeD          bool // x as (B, T, w) rather than (B*T, w)
	}
	cases := []ropeCase{
		{1, 1, 1, 2, false},
		{2, 7, 3, 8, false},
		{3, 33, 6, 64, true},
		{2, 130, 2, 32, false},
		{1, 5, 12, 6, true},
	}
	for _, c := range cases {
		w := c.heads * c.hd
		dims := []int{c.B * c.T, w}
		if c.threeD {
			dims = []int{c.B, c.T, w}
		}
		desc := fmt.Sprintf("x %v T=%d heads=%d hd=%d", dims, c.T, c.heads, c.hd)
		h.sub("RoPE %s", desc)
		tab := h.make(h.ropeTable(c.T, c.hd), c.T, c.hd)
		x, y := h.normal(dims...), h.garbage(dims...)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			lmKernelsOf(be).rope.Forward(T(y), T(x), T(tab), c.heads)
		})
		h.out("y", y, h.tol.Elem)

		h.step("RoPEBackward %s", desc)
		dy, dx := h.normal(dims...), h.grad(dims...)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			lmKernelsOf(be).rope.Backward(T(dx), T(dy), T(tab), c.heads)
		})
		h.acc("dx", dx, h.tol.Elem)
	}
}

func caseCausalAttention(h *harness) {
	type causalCase struct{ B, T, heads, kvHeads, hd int }
	cases := []causalCase{
		{1, 1, 1, 1, 5},
		{2, 7, 2, 2, 32},   // multi-head
		{2, 9, 6, 2, 16},   // grouped: 3 query heads per kv head
		{3, 33, 4, 1, 8},   // one kv head
		{2, 130, 6, 6, 64}, // the LM's head width, longer than a warp's row
		{1, 40, 12, 4, 32},
		{4, 3, 1, 1, 1}, // head width 1
	}
	for _, c := range cases {
		B, T, heads, kvHeads, hd := c.B, c.T, c.heads, c.kvHeads, c.hd
		qw, kw := heads*hd, kvHeads*hd
		desc := fmt.Sprintf("B=%d T=%d heads=%d kvHeads=%d hd=%d", B, T, heads, kvHeads, hd)
		h.sub("CausalAttention %s", desc)
		q, k, v := h.normal(B, T, qw), h.normal(B, T, kw), h.normal(B, T, kw)
		o, lse := h.garbage(B, T, qw), h.garbage(B, heads, T)
		h.both(func(be engine.Backend, Tn func(*pair) *engine.Tensor) {
			lmKernelsOf(be).causal.Forward(Tn(o), Tn(lse), Tn(q), Tn(k), Tn(v), heads, kvHeads)
		})
		h.allFinite("device o", o.dut.ToHost(), nil)
		h.allFinite("device lse", lse.dut.ToHost(), nil)
		h.out("o", o, h.tol.Gemm)
		h.out("lse", lse, h.tol.Gemm)

		// Causality: position 0 of every sequence attends to itself only, so
		// its output is its own value row exactly up to rounding of p = 1.
		oh, vv := o.dut.ToHost(), v.host
		bound := 1e-5 // P = 1 exactly; tf32/bf16 GEMMs round v itself
		if h.tol.Gemm > 1e-4 {
			bound = h.tol.Gemm
		}
		for b := range B {
			for j := range heads {
				g := j / (heads / kvHeads)
				for c := range hd {
					got, want := oh[b*T*qw+j*hd+c], vv[b*T*kw+g*hd+c]
					if math.Abs(float64(got-want)) > bound*(1+math.Abs(float64(want))) {
						h.errorf("o[%d, 0, head %d][%d] = %g, want v's %g (position 0 sees only itself)", b, j, c, got, want)
					}
				}
			}
		}

		oRef, lseRef := h.fromRef(o), h.fromRef(lse)
		for _, variant := range []string{"dq,dk,dv", "no dq", "no dk", "no dv", "dq only"} {
			h.sub("CausalAttentionBackward %s (%s)", desc, variant)
			q, k, v := h.make(q.host, B, T, qw), h.make(k.host, B, T, kw), h.make(v.host, B, T, kw)
			o, lse := h.make(oRef.host, B, T, qw), h.make(lseRef.host, B, heads, T)
			do := h.normal(B, T, qw)
			var dq, dk, dv *pair
			if variant != "no dq" {
				dq = h.grad(B, T, qw)
			}
			if variant != "no dk" && variant != "dq only" {
				dk = h.grad(B, T, kw)
			}
			if variant != "no dv" && variant != "dq only" {
				dv = h.grad(B, T, kw)
			}
			h.both(func(be engine.Backend, Tn func(*pair) *engine.Tensor) {
				lmKernelsOf(be).causal.Backward(Tn(dq), Tn(dk), Tn(dv), Tn(do), Tn(q), Tn(k), Tn(v), Tn(o), Tn(lse), heads, kvHeads)
			})
			for _, g := range []struct {
				name string
				p    *pair
			}{{"dq", dq}, {"dk", dk}, {"dv", dv}} {
				if g.p == nil {
					continue
				}
				h.allFinite("device "+g.name, g.p.dut.ToHost(), nil)
				if T == 1 && g.name != "dv" {
					// One key: P = 1, dS = 0 but for rounding noise on both
					// backends (see caseAttention). With tf32/bf16 GEMMs dO.v
					// is rounded while dO.o is not: the noise of dS is the
					// GEMM tolerance times sum_c |dO_c v_c| (<= hd max|dO|
					// max|v|), and dq, dk carry it times scale max|k| or
					// max|q|. (hd 5 with normal draws: about 0.007 in bf16,
					// over caseAttention's fixed tol/10.)
					bound := 1e-5
					if h.tol.Gemm > 1e-4 {
						terms := float64(hd) * maxAbsOf(do.host) * maxAbsOf(v.host) *
							max(maxAbsOf(q.host), maxAbsOf(k.host)) / math.Sqrt(float64(hd))
						bound = h.tol.Gemm * max(terms, 1) / 10
					}
					h.oneKeyNoise(g.name, g.p, bound)
					continue
				}
				h.acc(g.name, g.p, h.tol.Gemm)
			}
		}
	}
}

func caseEmbedding(h *harness) {
	type embCase struct {
		V, d, T int
		note    string
	}
	cases := []embCase{
		{1, 1, 1, ""},
		{7, 5, 9, "repeated ids"},
		{1000, 384, 300, ""},
		{70, 33, 4099, "many repeats"},
		{200, 300, 64, "one id"},
	}
	for _, c := range cases {
		ids := make([]float32, c.T)
		for t := range ids {
			switch c.note {
			case "one id":
				ids[t] = 17
			default:
				ids[t] = float32(h.rng.IntN(c.V))
			}
		}
		if c.note == "repeated ids" {
			ids[0], ids[3], ids[8] = 2, 2, 2
		}
		desc := fmt.Sprintf("V=%d d=%d T=%d %s", c.V, c.d, c.T, c.note)
		h.sub("Embedding %s", desc)
		table, idt, y := h.normal(c.V, c.d), h.make(ids, c.T), h.garbage(c.T, c.d)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			lmKernelsOf(be).embed.Forward(T(y), T(table), T(idt))
		})
		h.exact("y (a copy)", y.dut.ToHost(), y.ref.ToHost())

		h.step("EmbeddingBackward %s", desc)
		dy, dt := h.normal(c.T, c.d), h.grad(c.V, c.d)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			lmKernelsOf(be).embed.Backward(T(dt), T(dy), T(idt))
		})
		// Every element sums its tokens' rows in token order on both
		// backends, in fp32: the same bits.
		h.exact("dtable (token-order sums)", dt.dut.ToHost(), dt.ref.ToHost())
		h.acc("dtable", dt, h.tol.Elem) // and a change was made
	}
}

func caseCrossEntropy(h *harness) {
	type xentCase struct {
		c, V int
		note string
	}
	cases := []xentCase{
		{1, 1, ""},
		{5, 7, ""},
		{engine.CrossEntropyChunk, 1000, ""},
		{3, 32000, ""},
		{7, 33, "large"},      // logits near 90: exp overflows without the max shift
		{6, 130, "nonfinite"}, // a NaN row and a +Inf row: both backends NaN there
	}
	for _, c := range cases {
		ls := h.normals(c.c*c.V, 3)
		switch c.note {
		case "large":
			for i := range ls {
				ls[i] += 90
			}
		case "nonfinite":
			ls[1*c.V+c.V/2] = float32(math.NaN())
			ls[3*c.V+1] = float32(math.Inf(1))
		}
		tg := make([]float32, c.c)
		for r := range tg {
			tg[r] = float32(h.rng.IntN(c.V))
		}
		desc := fmt.Sprintf("logits (%d, %d) %s", c.c, c.V, c.note)
		h.sub("CrossEntropy %s", desc)
		logits, targets := h.make(ls, c.c, c.V), h.make(tg, c.c)
		nll, lse := h.garbage(c.c), h.garbage(c.c)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			lmKernelsOf(be).xent.Forward(T(nll), T(lse), T(logits), T(targets))
		})
		h.out("nll", nll, h.tol.Elem)
		h.out("lse", lse, h.tol.Elem)
		h.exact("logits (read only)", logits.dut.ToHost(), ls)

		lseRef := h.fromRef(lse)
		for _, dyv := range []float32{1, -0.37} {
			h.sub("CrossEntropyBackward %s dy=%g", desc, dyv)
			lg, lr := h.make(ls, c.c, c.V), h.make(lseRef.host, c.c)
			targets := h.make(tg, c.c)
			dy := h.make([]float32{dyv}, 1)
			scale := 1 / float32(c.c)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				lmKernelsOf(be).xent.Backward(T(lg), T(lr), T(targets), T(dy), scale)
			})
			h.out("dlogits (in place)", lg, h.tol.Elem)
			if c.note == "" {
				// Each row of the gradient sums to 0 (softmax minus one-hot).
				got := lg.dut.ToHost()
				for r := range c.c {
					var s, a float64
					for _, x := range got[r*c.V : (r+1)*c.V] {
						s += float64(x)
						a += math.Abs(float64(x))
					}
					if math.Abs(s) > 1e-5*max(a, 1e-30) && math.Abs(s) > 1e-7 {
						h.errorf("dlogits row %d sums to %g (|row| %g), want 0", r, s, a)
						break
					}
				}
			}
		}
	}
}

// caseLMTape is a small decoder step through the tape on both backends:
// tied embedding E -> q, k, v projections -> RoPE on q and k -> causal
// grouped-query attention -> residual -> VocabCrossEntropy against E, over
// more tokens than one cross-entropy chunk. The loss and the gradients of E
// and the projections are compared; the chain multiplies GEMM rounding, so
// the bound is twice the precision's GEMM tolerance.
func caseLMTape(h *harness) {
	const B, T, V, d, heads, kvHeads = 2, engine.CrossEntropyChunk/2 + 6, 300, 48, 4, 2 // B*T > one chunk
	const hd = d / heads
	h.sub("LMTape B=%d T=%d V=%d d=%d heads=%d kvHeads=%d", B, T, V, d, heads, kvHeads)
	ids := make([]int32, B*T+1)
	for i := range ids {
		ids[i] = int32(h.rng.IntN(V))
	}
	tab := h.ropeTable(T, hd)
	host := map[string][]float32{
		"E": h.normals(V*d, 0.15), "Wq": h.normals(d*d, 0.2), "Wk": h.normals(d*kvHeads*hd, 0.2), "Wv": h.normals(d*kvHeads*hd, 0.2),
	}
	dims := map[string][]int{"E": {V, d}, "Wq": {d, d}, "Wk": {d, kvHeads * hd}, "Wv": {d, kvHeads * hd}}
	names := []string{"E", "Wq", "Wk", "Wv"}
	type side struct {
		loss *engine.Tensor
		vars map[string]*engine.Tensor
	}
	run := func(tp *engine.Tape) side {
		vars := map[string]*engine.Tensor{}
		for _, n := range names {
			vars[n] = tp.Variable(host[n], dims[n]...)
		}
		table := tp.Input(tab, T, hd)
		x := tp.Embedding(vars["E"], ids[:B*T]) // (B*T, d)
		q := tp.Reshape(tp.RoPE(tp.MatMul(x, vars["Wq"], false, false), table, heads), B, T, d)
		k := tp.Reshape(tp.RoPE(tp.MatMul(x, vars["Wk"], false, false), table, kvHeads), B, T, kvHeads*hd)
		v := tp.Reshape(tp.MatMul(x, vars["Wv"], false, false), B, T, kvHeads*hd)
		o := tp.Reshape(tp.CausalAttention(q, k, v, heads, kvHeads), B*T, d)
		loss := tp.VocabCrossEntropy(tp.Add(x, o), vars["E"], ids[1:])
		if err := tp.Backward(loss); err != nil {
			h.errorf("Backward on %s: %v", tp.Backend().Name(), err)
		}
		return side{loss, vars}
	}
	ref, dut := run(h.rtp), run(h.dtp)
	if h.rtp.Err() != nil || h.dtp.Err() != nil {
		h.errorf("tapes: reference %v, device %v", h.rtp.Err(), h.dtp.Err())
		return
	}
	rtol := 2 * h.tol.Gemm
	h.out("loss", &pair{ref: ref.loss, dut: dut.loss, dims: []int{1}}, rtol)
	if l := ref.loss.Item(); !(l > 0) || l > 2*float32(math.Log(V)) {
		h.errorf("reference loss %g: want about log V = %.2f", l, math.Log(V))
	}
	for _, n := range names {
		h.out("d"+n, &pair{ref: ref.vars[n].Grad(), dut: dut.vars[n].Grad(), dims: dims[n]}, rtol)
	}
}

// lmDeterminism adds the language-model kernels' outputs to a determinism
// run (checkDeterminism): the embedding scatter-add over many repeated ids,
// the cross-entropy forward and in-place backward, causal attention forward
// and backward, and RoPE. Nothing when be lacks the kernels.
func lmDeterminism(be engine.Backend, tp *engine.Tape, normals func(int) []float32, intn func(int) int, out map[string][]float32) {
	if !hasLMKernels(be) {
		return
	}
	k := lmKernelsOf(be)
	const V, d, T = 70, 384, 4099
	ids := make([]float32, T)
	for i := range ids {
		ids[i] = float32(intn(V))
	}
	idt := tp.Input(ids, T)
	dtable := tp.Input(normals(V*d), V, d)
	k.embed.Backward(dtable, tp.Input(normals(T*d), T, d), idt)
	out["EmbeddingBackward"] = dtable.ToHost()

	const c, vocab = 128, 5000
	tg := make([]float32, c)
	for i := range tg {
		tg[i] = float32(intn(vocab))
	}
	logits, targets := tp.Input(normals(c*vocab), c, vocab), tp.Input(tg, c)
	nll, lse := tp.Input(make([]float32, c), c), tp.Input(make([]float32, c), c)
	k.xent.Forward(nll, lse, logits, targets)
	k.xent.Backward(logits, lse, targets, tp.Input([]float32{0.9}, 1), 1.0/c)
	out["CrossEntropy nll"], out["CrossEntropy lse"], out["CrossEntropyBackward"] = nll.ToHost(), lse.ToHost(), logits.ToHost()

	const B, S, heads, kvHeads, hd = 2, 65, 6, 2, 32
	qw, kw := heads*hd, kvHeads*hd
	q, kk, v := tp.Input(normals(B*S*qw), B, S, qw), tp.Input(normals(B*S*kw), B, S, kw), tp.Input(normals(B*S*kw), B, S, kw)
	o, l := tp.Input(make([]float32, B*S*qw), B, S, qw), tp.Input(make([]float32, B*heads*S), B, heads, S)
	k.causal.Forward(o, l, q, kk, v, heads, kvHeads)
	dq, dk, dv := tp.Input(normals(B*S*qw), B, S, qw), tp.Input(normals(B*S*kw), B, S, kw), tp.Input(normals(B*S*kw), B, S, kw)
	k.causal.Backward(dq, dk, dv, tp.Input(normals(B*S*qw), B, S, qw), q, kk, v, o, l, heads, kvHeads)
	for name, t := range map[string]*engine.Tensor{"o": o, "lse": l, "dq": dq, "dk": dk, "dv": dv} {
		out["CausalAttention "+name] = t.ToHost()
	}

	tab, _ := engine.RoPETable(S, hd, 10000)
	table := tp.Input(tab, S, hd)
	y, dx := tp.Input(make([]float32, B*S*qw), B*S, qw), tp.Input(normals(B*S*qw), B*S, qw)
	k.rope.Forward(y, tp.Input(normals(B*S*qw), B*S, qw), table, heads)
	k.rope.Backward(dx, y, table, heads)
	out["RoPE"], out["RoPEBackward"] = y.ToHost(), dx.ToHost()
}

// brokenLMKernel is brokenBackend.Kernel for the language-model kernels: k
// with fault put in when it is one of theirs.
func brokenLMKernel(inner engine.Backend, fault string, k any) any {
	switch k := k.(type) {
	case engine.RoPEKernels:
		if bwd := k.Backward; fault == "RoPEBackward overwrites" {
			k.Backward = func(dx, dy, table *engine.Tensor, heads int) {
				inner.Fill(dx, 0)
				bwd(dx, dy, table, heads)
			}
		}
		return k
	case engine.CausalAttentionKernels:
		if bwd := k.Backward; fault == "CausalAttentionBackward drops dk" {
			k.Backward = func(dq, _, dv, do, q, kk, v, o, lse *engine.Tensor, heads, kvHeads int) {
				bwd(dq, nil, dv, do, q, kk, v, o, lse, heads, kvHeads)
			}
		}
		return k
	case engine.EmbeddingKernels:
		if bwd := k.Backward; fault == "EmbeddingBackward overwrites" {
			k.Backward = func(dt, dy, ids *engine.Tensor) {
				inner.Fill(dt, 0)
				bwd(dt, dy, ids)
			}
		}
		return k
	case engine.CrossEntropyKernels:
		if bwd := k.Backward; fault == "CrossEntropyBackward ignores dy" {
			k.Backward = func(logits, lse, targets, _ *engine.Tensor, scale float32) {
				one := engine.NewTape(inner).Input([]float32{1}, 1)
				bwd(logits, lse, targets, one, scale)
			}
		}
		return k
	case engine.SpanAttentionKernel:
		if fault == "SpanAttention ignores the cache" {
			return engine.SpanAttentionKernel(func(o, q, kk, v, _, _, spans *engine.Tensor, heads, kvHeads int) {
				h := spans.ToHost() // (N, 3): every row's cache segment emptied
				for r := 0; r < len(h); r += 3 {
					h[r+1], h[r+2] = 0, 0
				}
				k(o, q, kk, v, nil, nil, engine.NewTape(inner).Input(h, spans.Dim(0), 3), heads, kvHeads)
			})
		}
		return k
	default:
		return k
	}
}

// TestBackendLMKernelsCUDA: with lm.ptx loaded (embedded, or in the folder
// GELOATTACK_CUDA_PTX names) the backend registers the four LM ops and
// Name() does not list them as missing (SpanAttention: registered exactly
// when that lm.ptx has its entry point, else refused and listed); without it the engine refuses each
// op with an error naming its kernel, and the test skips after checking
// that (the ops' numbers are TestBackendCrossCheck*'s LM cases).
func TestBackendLMKernelsCUDA(t *testing.T) {
	be := newTestBackend(t, PrecisionFP32) // skips without a GPU
	t.Logf("%s", be.Name())
	loaded := slices.Contains(be.Device().Kernels(), "ga_rope")
	if !loaded {
		tp := engine.NewTape(be)
		tp.Embedding(tp.Variable(make([]float32, 6), 3, 2), []int32{1})
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), `"embedding"`) {
			t.Errorf("Embedding without lm.ptx: tape error %v, want one naming the kernel \"embedding\"", err)
		}
		if !strings.Contains(be.Name(), "without") {
			t.Errorf("Name() %q does not say which kernels are missing", be.Name())
		}
		t.Skipf("no %s loaded: the four LM ops are refused (build it with scripts/build-ptx.sh)", lmModule)
	}
	for _, k := range lmCaseKernels {
		if be.Kernel(k) == nil {
			t.Errorf("kernel %q not registered although lm.cu's entry points are loaded", k)
		}
	}
	// SpanAttention came after the first lm.ptx: one built before it lacks
	// only that op, which is then refused while the four run.
	span := slices.Contains(be.Device().Kernels(), "ga_span_attention")
	if got := be.Kernel(engine.KernelSpanAttention) != nil; got != span {
		t.Errorf("span_attention registered %v, ga_span_attention loaded %v", got, span)
	}
	if !span {
		tp := engine.NewTape(be)
		tp.SetForwardOnly(true)
		x := tp.Input(make([]float32, 4), 1, 4)
		tp.SpanAttention(x, x, x, nil, nil, 0, []int32{0}, 1, 1)
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), `"span_attention"`) {
			t.Errorf("SpanAttention without ga_span_attention: tape error %v, want one naming the kernel \"span_attention\"", err)
		}
		t.Logf("%s lacks ga_span_attention (built before it): SpanAttention is refused", lmModule)
	}
	if strings.Contains(be.Name(), "without") == span {
		t.Errorf("Name() %q: lists missing kernels %v, want %v", be.Name(), strings.Contains(be.Name(), "without"), !span)
	}
}

// maxAbsOf is the largest |x| of xs.
func maxAbsOf(xs []float32) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}
