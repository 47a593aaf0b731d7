package cuda

// The cross-check harness: every method of engine.Backend run on a device
// under test (dut) and on a reference backend (ref, the CPU) with the same
// host data, and the results compared. backend_test.go points it at the CUDA
// backend; the tests in this file point it at a second CPU backend (which
// must pass) and at deliberately broken backends (which must fail), so that
// the harness itself is checked on machines without a GPU.
//
// Error metric (compareValues). For an output the op overwrites:
//
//	max_i |got_i - want_i| <= rtol * S,  S = max_i |want_i|,
//
// the normwise relative error of the whole tensor (an elementwise relative
// error is meaningless for entries that are sums with cancellation). For an
// output the op adds into (gradients, accumulate flags) S is the largest
// change the reference made, max_i |want_i - before_i|, so that the random
// values the buffer held before do not dilute the check, and the bound gets
// 2^-22 max_i |want_i| more: the rounding of the final fp32 addition, which
// the two backends may do on operands a few ulps apart. Non-finite values of
// the reference must be matched exactly (NaN by NaN, +Inf by +Inf, -Inf by
// -Inf), and a non-finite value where the reference is finite fails. rtol 0
// asks for bit-identical results (copies).
//
// Tolerances: rtol 1e-4 for every op in fp32; the GEMM-based ops (Gemm,
// Attention, AttentionBackward) get the precision's tolerance instead
// (tf32 1e-2, bf16 2e-2): bf16 keeps 8 significant bits (unit roundoff
// 2^-8 = 3.9e-3), tf32 11 (4.9e-4), and products of random data average the
// rounding of their inputs out only partly. The normwise error is taken over
// whole tensors, so cases whose rows differ wildly in scale (zero rows,
// saturated inputs, tiny norms) are separate sub-cases.
//
// Gradient buffers start with random non-zero values on both backends, so a
// kernel that overwrites where it should accumulate (or the reverse) fails.
// Outputs that must be overwritten start with large random garbage.

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// tolerances are the relative error bounds of compareValues.
type tolerances struct {
	Elem float64 // every op but the GEMM-based ones (fp32 whatever the precision)
	Gemm float64 // Gemm, Attention, AttentionBackward: depends on the GEMM precision
}

var (
	fp32Tol = tolerances{Elem: 1e-4, Gemm: 1e-4}
	tf32Tol = tolerances{Elem: 1e-4, Gemm: 1e-2}
	// bf16 keeps 8 significant bits per GEMM input (2^-9 relative rounding);
	// the attention backward chains four rounded products (S, dP, dQ, dK),
	// so a few entries of several thousand reach 2-3e-2.
	bf16Tol = tolerances{Elem: 1e-4, Gemm: 4e-2}
)

// reporter is the part of *testing.T the checks use; the harness self-test
// passes a recorder to see what they report.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// accRounding is the slack an accumulated output gets per unit of its
// magnitude: two float32 roundings (2 * 2^-23).
const accRounding = 1.0 / (1 << 22)

func isFinite32(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// sameNonFinite reports whether got is the same non-finite value as want.
func sameNonFinite(got, want float32) bool {
	if math.IsNaN(float64(want)) {
		return math.IsNaN(float64(got))
	}
	return got == want // +Inf or -Inf
}

// compareValues checks got against the reference want as the file comment
// describes; base is what an accumulated output held before the op (nil for
// an overwritten output). It returns the fraction of the bound used (max
// |got-want| over the bound; above 1 fails) and "" when got passes, else
// what is wrong.
func compareValues(got, want, base []float32, rtol float64) (used float64, msg string) {
	if len(got) != len(want) || (base != nil && len(base) != len(want)) {
		return math.Inf(1), fmt.Sprintf("lengths differ: got %d, want %d, base %d", len(got), len(want), len(base))
	}
	var scale, mag float64
	for i, w := range want {
		if !isFinite32(w) {
			continue
		}
		mag = max(mag, math.Abs(float64(w)))
		d := float64(w)
		if base != nil && isFinite32(base[i]) {
			d -= float64(base[i])
		}
		scale = max(scale, math.Abs(d))
	}
	bound := rtol * scale
	if base != nil {
		bound += accRounding * mag
	}
	worst, worstAt, over := 0.0, -1, 0
	badKind, firstBad := 0, -1
	for i, w := range want {
		g := got[i]
		if !isFinite32(w) || !isFinite32(g) {
			if !sameNonFinite(g, w) {
				if badKind == 0 {
					firstBad = i
				}
				badKind++
			}
			continue
		}
		d := math.Abs(float64(g) - float64(w))
		if d > bound {
			over++
		}
		if d > worst {
			worst, worstAt = d, i
		}
	}
	switch {
	case badKind > 0:
		used = math.Inf(1)
	case worst > 0:
		used = worst / bound
	}
	if over == 0 && badKind == 0 {
		return used, ""
	}
	var msgs []string
	if over > 0 {
		before := ""
		if base != nil {
			before = fmt.Sprintf(", before %g", base[worstAt])
		}
		msgs = append(msgs, fmt.Sprintf("%d of %d entries off: max |got-want| = %.3g at %d (got %g, want %g%s) > bound %.3g (relative error %.3g > rtol %g, scale %.3g)",
			over, len(want), worst, worstAt, got[worstAt], want[worstAt], before, bound, worst/max(scale, 1e-300), rtol, scale))
	}
	if badKind > 0 {
		msgs = append(msgs, fmt.Sprintf("%d non-finite mismatches, first at %d (got %g, want %g)", badKind, firstBad, got[firstBad], want[firstBad]))
	}
	return used, strings.Join(msgs, "; ")
}

// pair is one tensor made with the same values on both backends.
type pair struct {
	ref, dut *engine.Tensor
	host     []float32 // the values both were made with
	dims     []int
}

// harness builds pairs of tensors, runs ops on both backends and compares.
type harness struct {
	r        reporter
	rng      *rand.Rand
	ref, dut engine.Backend
	rtp, dtp *engine.Tape
	tol      tolerances
	what     string // the sub-case, prefixed to every message

	worst      float64 // largest fraction of the bound used
	worstWhere string
}

// sub starts a sub-case: names it and frees the tensors made so far (only
// their host copies stay valid).
func (h *harness) sub(format string, args ...any) {
	h.what = fmt.Sprintf(format, args...)
	h.rtp.Reset()
	h.dtp.Reset()
}

// step renames the sub-case, keeping its tensors (a backward that takes the
// forward's inputs).
func (h *harness) step(format string, args ...any) { h.what = fmt.Sprintf(format, args...) }

func (h *harness) errorf(format string, args ...any) {
	h.r.Helper()
	h.r.Errorf("%s: %s", h.what, fmt.Sprintf(format, args...))
}

func numel(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// make uploads data as a tensor of shape dims to both backends.
func (h *harness) make(data []float32, dims ...int) *pair {
	h.r.Helper()
	p := &pair{ref: h.rtp.Input(data, dims...), dut: h.dtp.Input(data, dims...), host: slices.Clone(data), dims: slices.Clone(dims)}
	if err := h.rtp.Err(); err != nil {
		h.errorf("reference tape: %v", err)
	}
	if err := h.dtp.Err(); err != nil {
		h.errorf("device tape: %v", err)
	}
	return p
}

// normals is n standard normal values times sd.
func (h *harness) normals(n int, sd float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(h.rng.NormFloat64()) * sd
	}
	return x
}

// uniforms is n values uniform in [lo, hi).
func (h *harness) uniforms(n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*h.rng.Float32()
	}
	return x
}

// normal is a pair of standard normal values.
func (h *harness) normal(dims ...int) *pair { return h.make(h.normals(numel(dims), 1), dims...) }

// grad is a gradient buffer: random non-zero values the op must add to.
func (h *harness) grad(dims ...int) *pair { return h.normal(dims...) }

// garbage is an output buffer the op must overwrite: large random values.
func (h *harness) garbage(dims ...int) *pair { return h.make(h.normals(numel(dims), 100), dims...) }

// fromRef is a new pair holding the reference's current values of p on both
// backends (to feed the same forward results to both backward kernels).
func (h *harness) fromRef(p *pair) *pair { return h.make(p.ref.ToHost(), p.dims...) }

// both runs f on the reference and then on the device; T maps a pair to
// that backend's tensor (nil to nil).
func (h *harness) both(f func(be engine.Backend, T func(*pair) *engine.Tensor)) {
	f(h.ref, func(p *pair) *engine.Tensor {
		if p == nil {
			return nil
		}
		return p.ref
	})
	f(h.dut, func(p *pair) *engine.Tensor {
		if p == nil {
			return nil
		}
		return p.dut
	})
}

// check compares p on the device with the reference; accumulated says the op
// added into p (then p.host is the base).
func (h *harness) check(name string, p *pair, accumulated bool, rtol float64) {
	h.r.Helper()
	if p == nil {
		return
	}
	var base []float32
	if accumulated {
		base = p.host
	}
	used, msg := compareValues(p.dut.ToHost(), p.ref.ToHost(), base, rtol)
	if msg != "" {
		h.errorf("%s %v: %s", name, p.dims, msg)
	}
	if used > h.worst {
		h.worst, h.worstWhere = used, fmt.Sprintf("%s: %s, rtol %g", h.what, name, rtol)
	}
}

// out checks an output the op overwrites.
func (h *harness) out(name string, p *pair, rtol float64) {
	h.r.Helper()
	h.check(name, p, false, rtol)
}

// oneKeyNoise checks a gradient that attention with a single key makes zero but for rounding
// (P = 1, so dS = 0): the device's and the CPU's values may differ by at most bound.
func (h *harness) oneKeyNoise(name string, p *pair, bound float64) {
	for i, x := range p.dut.ToHost() {
		if d := math.Abs(float64(x - p.host[i])); d > bound {
			h.errorf("%s[%d] changed by %g with one key: want 0 (up to rounding)", name, i, d)
			return
		}
	}
}

// acc checks an output the op adds into.
func (h *harness) acc(name string, p *pair, rtol float64) {
	h.r.Helper()
	h.check(name, p, true, rtol)
}

// exact checks that got is bit-identical to want (NaN matching NaN).
func (h *harness) exact(name string, got, want []float32) {
	h.r.Helper()
	if len(got) != len(want) {
		h.errorf("%s: %d values, want %d", name, len(got), len(want))
		return
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			h.errorf("%s: element %d is %g, want exactly %g", name, i, got[i], want[i])
			return
		}
	}
}

// allFinite checks that every value at an index keep accepts is finite.
func (h *harness) allFinite(name string, x []float32, keep func(i int) bool) {
	h.r.Helper()
	for i, v := range x {
		if (keep == nil || keep(i)) && !isFinite32(v) {
			h.errorf("%s: element %d is %g, want finite", name, i, v)
			return
		}
	}
}

// maskKind selects the key/row masks of Attention and MeanPool cases.
type maskKind int

const (
	maskNone      maskKind = iota // nil: every key real
	maskPrefix                    // real keys are a prefix (some sets shorter than N)
	maskScattered                 // real keys anywhere (not a prefix), at least one
	maskEmptySet                  // scattered, and the last batch element has no real key
)

func (k maskKind) String() string {
	return [...]string{"nil", "prefix", "scattered", "empty-set"}[k]
}

// mask returns a (B, N) mask of 1 (real) and 0 (padding), nil for maskNone.
func (h *harness) mask(kind maskKind, B, N int) []float32 {
	if kind == maskNone {
		return nil
	}
	m := make([]float32, B*N)
	for b := range B {
		row := m[b*N : (b+1)*N]
		switch {
		case kind == maskPrefix:
			n := 1 + h.rng.IntN(N)
			if b == 0 && N > 1 {
				n = 1 + h.rng.IntN(N-1) // at least one set is padded
			}
			for j := range n {
				row[j] = 1
			}
		case kind == maskEmptySet && b == B-1:
			// no real key
		default:
			for j := range row {
				if h.rng.Float32() < 0.6 {
					row[j] = 1
				}
			}
			row[h.rng.IntN(N)] = 1
			if N > 1 && b == 0 { // not a prefix: padding first, a real key last
				row[0], row[N-1] = 0, 1
			}
		}
	}
	return m
}

// poison overwrites the padded rows of x (B, N, h) with NaN, +Inf, -Inf and
// 3e38, which must not reach any output or gradient.
func poison(x, mask []float32, B, N, h int) {
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 3e38}
	for b := range B {
		for j := range N {
			if mask[b*N+j] > 0.5 {
				continue
			}
			for c := range h {
				x[(b*N+j)*h+c] = bad[(j+c)%len(bad)]
			}
		}
	}
}

// opCase is one op (forward and backward) with all its sub-cases.
type opCase struct {
	name string
	run  func(h *harness)
}

// opCases cover every method of engine.Backend.
var opCases = []opCase{
	{"Memory", caseMemory}, // Name, Alloc, Upload, Download, DownloadRange, Fill
	{"Axpy", caseAxpy},
	{"Copy2D", caseCopy2D},
	{"Gemm", caseGemm},
	{"GemmStrided", caseGemmStrided},
	{"RMSNorm", caseRMSNorm},
	{"Attention", caseAttention},
	{"SwiGLU", caseSwiGLU},
	{"Unary", caseUnary},
	{"Binary", caseBinary},
	{"ScaleRows", caseScaleRows},
	{"MeanPool", caseMeanPool},
	{"L2Normalize", caseL2Normalize},
	{"RowReduce", caseRowReduce},
	{"Reduce", caseReduce},
	{"InfoNCE", caseInfoNCE},
	{"Transpose", caseTranspose},
	{"BroadcastAdd", caseBroadcastAdd},
	{"PrependRow", casePrependRow},
	{"SumSquaresHost", caseSumSquaresHost},
	{"AdamW", caseAdamW},
	{"RoPE", caseRoPE}, // these five: crosscheck_lm_test.go
	{"CausalAttention", caseCausalAttention},
	{"Embedding", caseEmbedding},
	{"CrossEntropy", caseCrossEntropy},
	{"LMTape", caseLMTape},
	{"SpanAttention", caseSpanAttention}, // crosscheck_span_test.go
}

// checkBackendOps runs every op case on ref and dut, one subtest per op.
func checkBackendOps(t *testing.T, ref, dut engine.Backend, tol tolerances) {
	t.Logf("reference %s; device %s", ref.Name(), dut.Name())
	runOpCases(ref, dut, tol, func(name string, body func(r reporter)) {
		t.Run(name, func(t *testing.T) { body(t) })
	})
}

// runOpCases runs every op case, each through run, which supplies the
// reporter (a subtest, or a recorder in the self-test).
func runOpCases(ref, dut engine.Backend, tol tolerances, run func(name string, body func(r reporter))) {
	rtp, dtp := engine.NewTape(ref), engine.NewTape(dut)
	for _, c := range opCases {
		run(c.name, func(r reporter) {
			for _, k := range opCaseNeeds[c.name] {
				if dut.Kernel(k) == nil {
					r.Logf("%s: skipped: the device backend has no %q kernel (%s not loaded)", c.name, k, lmModule)
					return
				}
			}
			fh := fnv.New64a()
			fh.Write([]byte(c.name))
			h := &harness{r: r, rng: rand.New(rand.NewPCG(fh.Sum64(), 2024)), ref: ref, dut: dut, rtp: rtp, dtp: dtp, tol: tol, what: c.name}
			c.run(h)
			if h.worst > 0 {
				r.Logf("%s: largest error %.3g of its bound (%s)", c.name, h.worst, h.worstWhere)
			}
			if err := engine.Sync(dut); err != nil {
				r.Errorf("%s: device error: %v", c.name, err)
			}
			if err := engine.Sync(ref); err != nil {
				r.Errorf("%s: reference error: %v", c.name, err)
			}
		})
	}
	rtp.Reset()
	dtp.Reset()
}

// sameBackend reports whether a storage's backend is be (looking through
// the self-test's wrappers).
func sameBackend(got, be engine.Backend) bool {
	for {
		if got == be {
			return true
		}
		u, ok := be.(interface{ Unwrap() engine.Backend })
		if !ok {
			return false
		}
		be = u.Unwrap()
	}
}

func caseMemory(h *harness) {
	h.sub("Name")
	if h.dut.Name() == "" {
		h.errorf("Name() is empty")
	}
	for _, n := range []int{1, 7, 130, 4099} {
		h.sub("Alloc(%d)", n)
		st, err := h.dut.Alloc(n)
		if err != nil {
			h.errorf("%v", err)
			continue
		}
		if st.Len() < n {
			h.errorf("Len() = %d, want %d", st.Len(), n)
		}
		if !sameBackend(st.Backend(), h.dut) {
			h.errorf("storage's Backend() is %v, not the backend that allocated it", st.Backend())
		}
	}
	// Alloc'd memory is zeroed; from outside package engine it is visible
	// through Params, whose buffers are two Allocs.
	h.sub("Alloc zeroed (Params)")
	ps := engine.NewParams()
	ps.Add("a", []int{4099}, false)
	ps.Add("b", []int{7, 3}, false)
	if err := ps.Alloc(h.dut); err != nil {
		h.errorf("%v", err)
	} else {
		h.exact("params", ps.Data().ToHost(), make([]float32, ps.Len()))
		h.exact("params.grad", ps.Grad().ToHost(), make([]float32, ps.Len()))
	}

	for _, n := range []int{1, 7, 33, 130, 4099} {
		h.sub("Upload/Download n=%d", n)
		// Three neighbours in one arena chunk: the middle one has a
		// non-zero offset and writes to it must not spill.
		a, b, c := h.normal(n), h.normal(n), h.normal(n)
		for _, p := range []*pair{a, b, c} {
			h.exact("Download", p.dut.ToHost(), p.host)
		}
		ranges := [][2]int{{0, n}, {0, 1}, {n - 1, 1}, {n / 2, n - n/2}}
		if n > 7 {
			ranges = append(ranges, [2]int{3, 5})
		}
		for _, r := range ranges {
			got := make([]float32, r[1])
			h.dut.DownloadRange(got, b.dut, r[0])
			h.exact(fmt.Sprintf("DownloadRange(off %d, len %d)", r[0], r[1]), got, b.host[r[0]:r[0]+r[1]])
		}
		if got := b.dut.Item(); got != b.host[0] {
			h.errorf("Item() = %g, want %g", got, b.host[0])
		}
		// Upload over an existing tensor.
		next := h.normals(n, 1)
		h.dut.Upload(b.dut, next)
		h.exact("Upload over b", b.dut.ToHost(), next)
		h.exact("neighbour a after Upload", a.dut.ToHost(), a.host)
		h.exact("neighbour c after Upload", c.dut.ToHost(), c.host)
	}

	for _, n := range []int{1, 7, 130, 4099} {
		for _, v := range []float32{0, 1.5, -2.25e-5, float32(math.Inf(-1))} {
			h.sub("Fill n=%d v=%g", n, v)
			a, b, c := h.normal(n), h.normal(n), h.normal(n)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Fill(T(b), v) })
			want := make([]float32, n)
			for i := range want {
				want[i] = v
			}
			h.exact("Fill", b.dut.ToHost(), want)
			h.exact("neighbour a", a.dut.ToHost(), a.host)
			h.exact("neighbour c", c.dut.ToHost(), c.host)
		}
	}
}

func caseAxpy(h *harness) {
	for _, n := range []int{1, 7, 130, 4099, 70001} {
		for _, alpha := range []float32{1, -0.5, 0, 3} {
			h.sub("Axpy n=%d alpha=%g", n, alpha)
			y, x := h.normal(n), h.normal(n)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Axpy(T(y), alpha, T(x)) })
			h.acc("y", y, h.tol.Elem)
		}
	}
}

func caseCopy2D(h *harness) {
	cases := []struct {
		note                                     string
		dstOff, dstLd, srcOff, srcLd, rows, cols int
	}{
		{"one row", 0, 5, 0, 5, 1, 5},
		{"one long row, offsets", 3, 4099, 2, 4099, 1, 4099},
		{"strided block, offsets", 1, 6, 2, 7, 3, 5},
		{"contiguous block", 0, 33, 0, 33, 130, 33},
		{"one column", 7, 1, 0, 3, 130, 1},
		{"srcLd 0: one row repeated", 0, 33, 5, 0, 4, 33},
		{"srcLd 0, long row", 2, 130, 1, 0, 7, 130},
		{"dstLd 0: rows summed", 2, 0, 3, 9, 7, 5},
		{"dstLd 0: column summed", 0, 0, 1, 1, 130, 1},
		{"dstLd 0: many rows", 1, 0, 0, 384, 33, 384},
		{"dstLd 0: one row", 4, 0, 0, 7, 1, 7},
	}
	for _, c := range cases {
		for _, accumulate := range []bool{false, true} {
			if c.dstLd == 0 && !accumulate {
				continue // summing rows is defined only with accumulate
			}
			h.sub("Copy2D %s (dst %d+r*%d, src %d+r*%d, %dx%d) accumulate=%v", c.note, c.dstOff, c.dstLd, c.srcOff, c.srcLd, c.rows, c.cols, accumulate)
			// Extra elements around the block must stay untouched.
			dst := h.normal(c.dstOff + (c.rows-1)*c.dstLd + c.cols + 3)
			src := h.normal(c.srcOff + (c.rows-1)*c.srcLd + c.cols + 2)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				be.Copy2D(T(dst), c.dstOff, c.dstLd, T(src), c.srcOff, c.srcLd, c.rows, c.cols, accumulate)
			})
			rtol := 0.0 // a copy is exact
			if accumulate {
				rtol = h.tol.Elem
			}
			h.acc("dst", dst, rtol) // base: what the untouched elements must keep
		}
	}
}

func caseGemm(h *harness) {
	sizes := [][3]int{{1, 1, 1}, {7, 33, 5}, {130, 65, 129}, {385, 64, 384}}
	scalars := [][2]float32{{1, 0}, {-0.75, 1}, {1.25, 0.5}}
	for _, s := range sizes {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, batch := range []int{1, 3} {
					for _, ab := range scalars {
						alpha, beta := ab[0], ab[1]
						h.sub("Gemm transA=%v transB=%v batch=%d m,n,k=%d,%d,%d alpha=%g beta=%g", tA, tB, batch, m, n, k, alpha, beta)
						aDims, bDims := []int{batch, m, k}, []int{batch, k, n}
						if tA {
							aDims = []int{batch, k, m}
						}
						if tB {
							bDims = []int{batch, n, k}
						}
						a, b, c := h.normal(aDims...), h.normal(bDims...), h.normal(batch, m, n)
						h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
							be.Gemm(tA, tB, batch, m, n, k, alpha, T(a), T(b), beta, T(c))
						})
						h.out("C", c, h.tol.Gemm)
					}
				}
			}
		}
	}
	// beta 0 must not read C: NaN there must not reach the result.
	for _, s := range sizes[1:] {
		m, n, k := s[0], s[1], s[2]
		h.sub("Gemm beta=0 over NaN m,n,k=%d,%d,%d", m, n, k)
		nan := make([]float32, 2*m*n)
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		a, b, c := h.normal(2, m, k), h.normal(2, n, k), h.make(nan, 2, m, n)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			be.Gemm(false, true, 2, m, n, k, 1, T(a), T(b), 0, T(c))
		})
		h.allFinite("reference C", c.ref.ToHost(), nil)
		h.out("C", c, h.tol.Gemm)
	}
}

// caseGemmStrided: a shared A (stride 0: one input through a stack of weights, the fused q/k/v
// forward), a shared B (the stack's weight gradient) and C blocks with a gap between them.
func caseGemmStrided(h *harness) {
	for _, s := range [][3]int{{7, 33, 5}, {385, 64, 384}} {
		m, n, k := s[0], s[1], s[2]
		const batch = 3
		h.sub("GemmStrided shared A m,n,k=%d,%d,%d", m, n, k)
		a, b, c := h.normal(m, k), h.normal(batch, n, k), h.normal(batch, m, n)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			be.GemmStrided(false, true, batch, m, n, k, 1, T(a), 0, T(b), n*k, 0, T(c), m*n)
		})
		h.out("C", c, h.tol.Gemm)

		h.sub("GemmStrided shared B, beta 1 m,n,k=%d,%d,%d", m, n, k)
		a, b, c = h.normal(batch, k, m), h.normal(k, n), h.normal(batch, m, n)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			be.GemmStrided(true, false, batch, m, n, k, 1, T(a), m*k, T(b), 0, 1, T(c), m*n)
		})
		h.out("C", c, h.tol.Gemm)

		h.sub("GemmStrided C with gaps m,n,k=%d,%d,%d", m, n, k)
		a, b, c = h.normal(batch, m, k), h.normal(batch, k, n), h.normal(batch, m+1, n)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			be.GemmStrided(false, false, batch, m, n, k, 0.5, T(a), m*k, T(b), k*n, 0, T(c), (m+1)*n)
		})
		h.out("C", c, h.tol.Gemm)
	}
}

func caseRMSNorm(h *harness) {
	type rmsCase struct {
		dims    []int
		eps     float32
		zeroRow bool
	}
	cases := []rmsCase{
		{[]int{1, 1}, 1e-5, false},
		{[]int{7, 5}, 1e-5, false},
		{[]int{7, 5}, 0.5, false},
		{[]int{33, 130}, 1e-5, false},
		{[]int{4, 384}, 1e-5, false},
		{[]int{2, 3, 33}, 1e-5, false},
		{[]int{130, 1}, 1e-5, false},
		{[]int{5, 33}, 1e-2, true}, // a zero row: rstd = 1/sqrt(eps)
	}
	for _, c := range cases {
		hd := c.dims[len(c.dims)-1]
		M := numel(c.dims) / hd
		h.sub("RMSNorm x %v eps=%g zeroRow=%v", c.dims, c.eps, c.zeroRow)
		xs := h.normals(numel(c.dims), 1)
		if c.zeroRow {
			clear(xs[hd : 2*hd])
		}
		x, w := h.make(xs, c.dims...), h.make(h.uniforms(hd, 0.5, 1.5), hd)
		y, rstd := h.garbage(c.dims...), h.garbage(M)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).rmsNorm.Forward(T(y), T(rstd), T(x), T(w), c.eps)
		})
		h.out("y", y, h.tol.Elem)
		h.out("rstd", rstd, h.tol.Elem)

		rs := h.fromRef(rstd)
		for _, v := range []string{"dx,dw", "dx only", "dw only"} {
			h.sub("RMSNormBackward x %v eps=%g zeroRow=%v (%s)", c.dims, c.eps, c.zeroRow, v)
			x, w := h.make(x.host, c.dims...), h.make(w.host, hd)
			rs := h.make(rs.host, M)
			dy := h.normal(c.dims...)
			var dx, dw *pair
			if v != "dw only" {
				dx = h.grad(c.dims...)
			}
			if v != "dx only" {
				dw = h.grad(hd)
			}
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).rmsNorm.Backward(T(dx), T(dw), T(dy), T(x), T(w), T(rs))
			})
			h.acc("dx", dx, h.tol.Elem)
			h.acc("dw", dw, h.tol.Elem)
		}
	}
}

func caseAttention(h *harness) {
	type attnCase struct {
		B, Nq, Nk, heads, dh int
		mask                 maskKind
		poison               bool // NaN/Inf in padded K and V rows
	}
	cases := []attnCase{
		{1, 1, 1, 1, 5, maskNone, false},
		{2, 7, 7, 2, 32, maskNone, false},
		{3, 9, 9, 12, 32, maskPrefix, false},
		{3, 9, 9, 12, 32, maskPrefix, true},
		{2, 33, 33, 12, 5, maskScattered, false},
		{2, 33, 33, 12, 5, maskScattered, true},
		{2, 3, 9, 2, 5, maskEmptySet, true},  // cross-attention, Nq < Nk
		{3, 9, 3, 1, 32, maskEmptySet, true}, // Nq > Nk
		{2, 130, 130, 2, 32, maskEmptySet, true},
		{2, 7, 33, 12, 32, maskScattered, true},
		{4, 1, 7, 1, 1, maskEmptySet, true}, // dh 1, one query
	}
	for _, c := range cases {
		B, Nq, Nk, heads, dh := c.B, c.Nq, c.Nk, c.heads, c.dh
		hd := heads * dh
		desc := fmt.Sprintf("B=%d Nq=%d Nk=%d heads=%d dh=%d mask=%v poison=%v", B, Nq, Nk, heads, dh, c.mask, c.poison)
		h.sub("Attention %s", desc)
		mk := h.mask(c.mask, B, Nk)
		ks, vs := h.normals(B*Nk*hd, 1), h.normals(B*Nk*hd, 1)
		if c.poison && mk != nil {
			poison(ks, mk, B, Nk, hd)
			poison(vs, mk, B, Nk, hd)
		}
		q, k, v := h.normal(B, Nq, hd), h.make(ks, B, Nk, hd), h.make(vs, B, Nk, hd)
		var mask *pair
		if mk != nil {
			mask = h.make(mk, B, Nk)
		}
		o, lse := h.garbage(B, Nq, hd), h.garbage(B, heads, Nq)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).attention.Forward(T(o), T(lse), T(q), T(k), T(v), T(mask), heads)
		})
		// Which batch elements have no real key: their lse is -Inf, their
		// output zero; everything else must be finite on both backends.
		empty := make([]bool, B)
		for b := range B {
			empty[b] = mk != nil && !slices.Contains(mk[b*Nk:(b+1)*Nk], 1)
		}
		realLSE := func(i int) bool { return !empty[i/(heads*Nq)] }
		for _, side := range []struct {
			name   string
			o, lse []float32
		}{{"reference", o.ref.ToHost(), lse.ref.ToHost()}, {"device", o.dut.ToHost(), lse.dut.ToHost()}} {
			h.allFinite(side.name+" o", side.o, nil)
			h.allFinite(side.name+" lse", side.lse, realLSE)
			for b := range B {
				if !empty[b] {
					continue
				}
				h.exact(fmt.Sprintf("%s o of empty set %d", side.name, b), side.o[b*Nq*hd:(b+1)*Nq*hd], make([]float32, Nq*hd))
				for i := b * heads * Nq; i < (b+1)*heads*Nq; i++ {
					if !math.IsInf(float64(side.lse[i]), -1) {
						h.errorf("%s lse[%d] of empty set %d is %g, want -Inf", side.name, i, b, side.lse[i])
						break
					}
				}
			}
		}
		h.out("o", o, h.tol.Gemm)
		h.out("lse", lse, h.tol.Gemm)

		// Backward from the reference's o and lse, the same on both.
		oRef, lseRef := h.fromRef(o), h.fromRef(lse)
		for _, v := range []string{"dq,dk,dv", "no dq", "no dk", "no dv", "dq only"} {
			h.sub("AttentionBackward %s (%s)", desc, v)
			q, k, vv := h.make(q.host, B, Nq, hd), h.make(ks, B, Nk, hd), h.make(vs, B, Nk, hd)
			var mask *pair
			if mk != nil {
				mask = h.make(mk, B, Nk)
			}
			o, lse := h.make(oRef.host, B, Nq, hd), h.make(lseRef.host, B, heads, Nq)
			do := h.normal(B, Nq, hd)
			var dq, dk, dv *pair
			if v != "no dq" {
				dq = h.grad(B, Nq, hd)
			}
			if v != "no dk" && v != "dq only" {
				dk = h.grad(B, Nk, hd)
			}
			if v != "no dv" && v != "dq only" {
				dv = h.grad(B, Nk, hd)
			}
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).attention.Backward(T(dq), T(dk), T(dv), T(do), T(q), T(k), T(vv), T(mask), T(o), T(lse), heads)
			})
			for _, g := range []struct {
				name string
				p    *pair
				N    int
			}{{"dq", dq, Nq}, {"dk", dk, Nk}, {"dv", dv, Nk}} {
				if g.p == nil {
					continue
				}
				for _, side := range []struct {
					name string
					x    []float32
				}{{"reference", g.p.ref.ToHost()}, {"device", g.p.dut.ToHost()}} {
					h.allFinite(side.name+" "+g.name, side.x, nil)
					// Padded keys and values, and every row of a set with
					// no real key, get exactly zero gradient.
					for b := range B {
						for j := range g.N {
							padded := empty[b] || (g.name != "dq" && mk != nil && mk[b*Nk+j] < 0.5)
							if !padded {
								continue
							}
							lo := (b*g.N + j) * hd
							h.exact(fmt.Sprintf("%s %s row (%d, %d) (padded: zero gradient)", side.name, g.name, b, j), side.x[lo:lo+hd], g.p.host[lo:lo+hd])
						}
					}
				}
				if Nk == 1 && g.name != "dv" {
					// One key: P = 1, so dS = P (dO.v - dO.o) = 0 and dq, dk
					// are zero but for rounding noise, on both backends:
					// no relative error to speak of. Bound the noise: 1e-5
					// in fp32; with tf32/bf16 GEMMs dO.v is rounded while
					// dO.o is not, and the noise is the GEMM tolerance
					// times the size of the terms (about 1 here).
					bound := 1e-5
					if h.tol.Gemm > 1e-4 {
						bound = h.tol.Gemm / 10
					}
					h.oneKeyNoise(g.name, g.p, bound)
					continue
				}
				h.acc(g.name, g.p, h.tol.Gemm)
			}
		}
	}
}

func caseSwiGLU(h *harness) {
	type swCase struct {
		dims      []int
		saturated bool // gates of +-20 and +-90 among normal ones
	}
	cases := []swCase{{[]int{1}, false}, {[]int{7}, false}, {[]int{130}, false}, {[]int{33, 65}, false}, {[]int{4099}, false}, {[]int{7, 9}, true}}
	for _, c := range cases {
		n := numel(c.dims)
		gs := h.normals(n, 3)
		if c.saturated {
			ext := []float32{20, -20, 90, -90}
			for i := 0; i < n; i += 3 {
				gs[i] = ext[(i/3)%len(ext)]
			}
		}
		h.sub("SwiGLU %v saturated=%v", c.dims, c.saturated)
		gate, up := h.make(gs, c.dims...), h.normal(c.dims...)
		y := h.garbage(c.dims...)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).swiglu.Forward(T(y), T(gate), T(up))
		})
		h.out("y", y, h.tol.Elem)

		for _, accGate := range []bool{false, true} {
			for _, accUp := range []bool{false, true} {
				for _, v := range []string{"dgate,dup", "no dgate", "no dup"} {
					h.sub("SwiGLUBackward %v saturated=%v accGate=%v accUp=%v (%s)", c.dims, c.saturated, accGate, accUp, v)
					gate, up, dy := h.make(gate.host, c.dims...), h.make(up.host, c.dims...), h.normal(c.dims...)
					var dg, du *pair
					if v != "no dgate" {
						dg = h.grad(c.dims...)
					}
					if v != "no dup" {
						du = h.grad(c.dims...)
					}
					h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
						kernelsOf(be).swiglu.Backward(T(dg), T(du), T(dy), T(gate), T(up), accGate, accUp)
					})
					h.check("dgate", dg, accGate, h.tol.Elem)
					h.check("dup", du, accUp, h.tol.Elem)
				}
			}
		}
	}
	// silu(x)*x: the tape passes one tensor as gate and up and one buffer as
	// both gradients, accumulating into it twice.
	for _, n := range []int{1, 130} {
		h.sub("SwiGLUBackward aliased gate=up, dgate=dup n=%d", n)
		x, dy, d := h.make(h.normals(n, 3), n), h.normal(n), h.grad(n)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).swiglu.Backward(T(d), T(d), T(dy), T(x), T(x), true, true)
		})
		h.acc("dgate=dup", d, h.tol.Elem)
	}
}

var unaryNames = map[engine.UnaryOp]string{
	engine.UnaryScale: "Scale", engine.UnaryAddScalar: "AddScalar", engine.UnaryExp: "Exp",
	engine.UnaryLog: "Log", engine.UnarySquare: "Square", engine.UnarySqrt: "Sqrt",
}

func caseUnary(h *harness) {
	for op := engine.UnaryScale; op <= engine.UnarySqrt; op++ {
		var c float32
		switch op {
		case engine.UnaryScale:
			c = -1.5
		case engine.UnaryAddScalar:
			c = 0.25
		}
		for _, n := range []int{1, 7, 130, 4099} {
			var xs []float32
			switch op {
			case engine.UnaryLog, engine.UnarySqrt:
				xs = h.uniforms(n, 0.05, 4)
			case engine.UnaryExp:
				xs = h.normals(n, 2)
			default:
				xs = h.normals(n, 1)
			}
			h.sub("Unary %s c=%g n=%d", unaryNames[op], c, n)
			x, y := h.make(xs, n), h.garbage(n)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Unary(op, T(y), T(x), c) })
			h.out("y", y, h.tol.Elem)

			h.step("UnaryBackward %s c=%g n=%d", unaryNames[op], c, n)
			yr := h.fromRef(y)
			dy, dx := h.normal(n), h.grad(n)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				be.UnaryBackward(op, T(dx), T(dy), T(x), T(yr), c)
			})
			h.acc("dx", dx, h.tol.Elem)
		}
	}
}

var binaryNames = map[engine.BinaryOp]string{
	engine.BinaryAdd: "Add", engine.BinarySub: "Sub", engine.BinaryMul: "Mul", engine.BinaryDiv: "Div",
}

func caseBinary(h *harness) {
	bValues := func(op engine.BinaryOp, n int) []float32 {
		if op != engine.BinaryDiv {
			return h.normals(n, 1)
		}
		b := h.uniforms(n, 0.5, 2) // away from zero
		for i := range b {
			if h.rng.IntN(2) == 0 {
				b[i] = -b[i]
			}
		}
		return b
	}
	for op := engine.BinaryAdd; op <= engine.BinaryDiv; op++ {
		for _, n := range []int{1, 7, 130, 4099} {
			for _, scalar := range []bool{false, true} {
				if scalar && (op == engine.BinaryAdd || n == 1) {
					continue // Add takes b of a's shape only
				}
				nb := n
				if scalar {
					nb = 1
				}
				desc := fmt.Sprintf("%s n=%d b of %d", binaryNames[op], n, nb)
				h.sub("Binary %s", desc)
				as, bs := h.normals(n, 1), bValues(op, nb)
				a, b, y := h.make(as, n), h.make(bs, nb), h.garbage(n)
				h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Binary(op, T(y), T(a), T(b)) })
				h.out("y", y, h.tol.Elem)

				for _, v := range []string{"da,db", "no da", "no db"} {
					h.sub("BinaryBackward %s (%s)", desc, v)
					a, b, dy := h.make(as, n), h.make(bs, nb), h.normal(n)
					var da, db *pair
					if v != "no da" {
						da = h.grad(n)
					}
					if v != "no db" {
						db = h.grad(nb)
					}
					h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
						be.BinaryBackward(op, T(da), T(db), T(dy), T(a), T(b))
					})
					h.acc("da", da, h.tol.Elem)
					h.acc("db", db, h.tol.Elem)
				}
			}
		}
		// x op x: the tape passes one tensor as a and b and one buffer as
		// both gradients (Mul(x, x) is x^2).
		h.sub("BinaryBackward %s aliased a=b, da=db", binaryNames[op])
		x, dy, d := h.make(bValues(op, 130), 130), h.normal(130), h.grad(130)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			be.BinaryBackward(op, T(d), T(d), T(dy), T(x), T(x))
		})
		h.acc("da=db", d, h.tol.Elem)
	}
}

func caseScaleRows(h *harness) {
	for _, dims := range [][]int{{1, 1}, {7, 5}, {33, 130}, {2, 3, 7}, {130, 1}} {
		M := numel(dims) / dims[len(dims)-1]
		for _, accumulate := range []bool{false, true} {
			h.sub("ScaleRows x %v accumulate=%v", dims, accumulate)
			x, s, y := h.normal(dims...), h.normal(M), h.normal(dims...)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).scaleRows(T(y), T(x), T(s), accumulate)
			})
			h.check("y", y, accumulate, h.tol.Elem)
		}
	}
}

func caseMeanPool(h *harness) {
	for _, dims := range [][3]int{{1, 1, 1}, {3, 7, 5}, {2, 33, 130}, {4, 9, 1}} {
		B, N, hd := dims[0], dims[1], dims[2]
		for _, mkind := range []maskKind{maskNone, maskScattered, maskEmptySet} {
			if mkind == maskEmptySet && B < 2 {
				continue
			}
			desc := fmt.Sprintf("x (%d, %d, %d) mask=%v", B, N, hd, mkind)
			h.sub("MeanPool %s", desc)
			mk := h.mask(mkind, B, N)
			var mask *pair
			if mk != nil {
				mask = h.make(mk, B, N)
			}
			x, y := h.normal(B, N, hd), h.garbage(B, hd)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).meanPool.Forward(T(y), T(x), T(mask))
			})
			h.out("y", y, h.tol.Elem)

			h.step("MeanPoolBackward %s", desc)
			dy, dx := h.normal(B, hd), h.grad(B, N, hd)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).meanPool.Backward(T(dx), T(dy), T(mask))
			})
			h.acc("dx", dx, h.tol.Elem)
		}
	}
}

func caseL2Normalize(h *harness) {
	type l2Case struct {
		dims  []int
		eps   float32
		small bool // row 1 zero, row 3 of norm < eps: the clamped branch
	}
	cases := []l2Case{
		{[]int{1, 1}, engine.L2NormEps, false},
		{[]int{7, 5}, engine.L2NormEps, false},
		{[]int{33, 130}, engine.L2NormEps, false},
		{[]int{2, 3, 7}, engine.L2NormEps, false},
		{[]int{130, 1}, engine.L2NormEps, false},
		{[]int{5, 7}, 0.1, true},
		{[]int{4, 130}, 0.1, true},
	}
	for _, c := range cases {
		e := c.dims[len(c.dims)-1]
		M := numel(c.dims) / e
		desc := fmt.Sprintf("x %v eps=%g small=%v", c.dims, c.eps, c.small)
		h.sub("L2Normalize %s", desc)
		xs := h.normals(numel(c.dims), 1)
		if c.small {
			clear(xs[e : 2*e])
			for j := 3 * e; j < 4*e; j++ {
				xs[j] *= 1e-3
			}
		}
		x, y, norm := h.make(xs, c.dims...), h.garbage(c.dims...), h.garbage(M)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).l2Normalize.Forward(T(y), T(norm), T(x), c.eps)
		})
		h.out("y", y, h.tol.Elem)
		h.out("norm", norm, h.tol.Elem)

		h.step("L2NormalizeBackward %s", desc)
		yr, nr := h.fromRef(y), h.fromRef(norm)
		dy, dx := h.normal(c.dims...), h.grad(c.dims...)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).l2Normalize.Backward(T(dx), T(dy), T(yr), T(nr), c.eps)
		})
		h.acc("dx", dx, h.tol.Elem)
	}
}

func caseRowReduce(h *harness) {
	type rrCase struct {
		op   engine.RowOp
		dims []int
		note string
	}
	var cases []rrCase
	for _, op := range []engine.RowOp{engine.RowLogSumExp, engine.RowNorm} {
		for _, dims := range [][]int{{1, 1}, {7, 5}, {33, 130}, {130, 1}, {2, 3, 7}} {
			cases = append(cases, rrCase{op, dims, ""})
		}
	}
	cases = append(cases,
		rrCase{engine.RowLogSumExp, []int{7, 33}, "large"}, // exp would overflow without the max shift
		rrCase{engine.RowNorm, []int{7, 5}, "zero row"},    // norm 0, zero gradient
	)
	for _, c := range cases {
		C := c.dims[len(c.dims)-1]
		M := numel(c.dims) / C
		name := map[engine.RowOp]string{engine.RowLogSumExp: "LogSumExp", engine.RowNorm: "Norm"}[c.op]
		desc := fmt.Sprintf("%s x %v %s", name, c.dims, c.note)
		xs := h.normals(numel(c.dims), 3)
		switch c.note {
		case "large":
			for i := range xs {
				xs[i] += 90
			}
		case "zero row":
			clear(xs[2*C : 3*C])
		}
		h.sub("RowReduce %s", desc)
		x, y := h.make(xs, c.dims...), h.garbage(M)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).rowReduce.Forward(c.op, T(y), T(x))
		})
		h.out("y", y, h.tol.Elem)

		h.step("RowReduceBackward %s", desc)
		yr, dy, dx := h.fromRef(y), h.normal(M), h.grad(c.dims...)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
			kernelsOf(be).rowReduce.Backward(c.op, T(dx), T(dy), T(x), T(yr))
		})
		h.acc("dx", dx, h.tol.Elem)
	}
}

func caseReduce(h *harness) {
	for _, op := range []engine.ReduceOp{engine.ReduceSum, engine.ReduceSumSquares} {
		name := map[engine.ReduceOp]string{engine.ReduceSum: "Sum", engine.ReduceSumSquares: "SumSquares"}[op]
		for _, n := range []int{1, 7, 130, 4099, 100003} {
			xs := h.normals(n, 1)
			if n > 10000 { // a sum far from zero (well conditioned)
				xs = h.uniforms(n, -0.5, 1.5)
			}
			h.sub("Reduce %s n=%d", name, n)
			x, y := h.make(xs, n), h.garbage(1)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Reduce(op, T(y), T(x)) })
			h.out("y", y, h.tol.Elem)

			h.step("ReduceBackward %s n=%d", name, n)
			dy, dx := h.normal(1), h.grad(n)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.ReduceBackward(op, T(dx), T(dy), T(x)) })
			h.acc("dx", dx, h.tol.Elem)
		}
	}
}

func caseInfoNCE(h *harness) {
	for _, dims := range [][2]int{{1, 1}, {5, 1}, {7, 33}, {16, 130}, {3, 4099}} {
		B, C := dims[0], dims[1]
		for _, several := range []bool{false, true} {
			if several && C == 1 {
				continue
			}
			ps := make([]float32, B*C)
			for b := range B {
				ps[b*C+h.rng.IntN(C)] = 1
				if several {
					for range 1 + h.rng.IntN(min(C, 5)) {
						ps[b*C+h.rng.IntN(C)] = 1
					}
				}
			}
			desc := fmt.Sprintf("scores (%d, %d) several positives=%v", B, C, several)
			h.sub("InfoNCE %s", desc)
			scores, pos, y := h.make(h.normals(B*C, 3), B, C), h.make(ps, B, C), h.garbage(1)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).infoNCE.Forward(T(y), T(scores), T(pos))
			})
			h.out("y", y, h.tol.Elem)

			h.step("InfoNCEBackward %s", desc)
			dy, ds := h.normal(1), h.grad(B, C)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).infoNCE.Backward(T(ds), T(dy), T(scores), T(pos))
			})
			h.acc("dscores", ds, h.tol.Elem)
		}
	}
}

func caseTranspose(h *harness) {
	for _, dims := range [][]int{{1, 1}, {7, 5}, {33, 130}, {1, 130}, {3, 7, 33}, {2, 2, 5, 3}, {2, 65, 33}} {
		ydims := slices.Clone(dims)
		r := len(dims)
		ydims[r-2], ydims[r-1] = dims[r-1], dims[r-2]
		for _, accumulate := range []bool{false, true} {
			h.sub("Transpose x %v accumulate=%v", dims, accumulate)
			x, y := h.normal(dims...), h.normal(ydims...)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Transpose(T(y), T(x), accumulate) })
			rtol := 0.0
			if accumulate {
				rtol = h.tol.Elem
			}
			h.check("y", y, accumulate, rtol)
		}
	}
}

func caseBroadcastAdd(h *harness) {
	for _, dims := range [][]int{{1, 1}, {7, 5}, {130, 1}, {1, 130}, {3, 33, 7}, {2, 2, 3, 4}} {
		r := len(dims)
		colDims := dims[:r-1]                                  // (..., M)
		rowDims := append(slices.Clone(dims[:r-2]), dims[r-1]) // (..., C)
		for _, withCol := range []bool{false, true} {
			for _, withRow := range []bool{false, true} {
				h.sub("BroadcastAdd x %v col=%v row=%v", dims, withCol, withRow)
				x, y := h.normal(dims...), h.garbage(dims...)
				var col, row *pair
				if withCol {
					col = h.normal(colDims...)
				}
				if withRow {
					row = h.normal(rowDims...)
				}
				h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
					kernelsOf(be).broadcastAdd.Forward(T(y), T(x), T(col), T(row))
				})
				h.out("y", y, h.tol.Elem)
			}
		}
		for mask := 1; mask < 8; mask++ { // which of dx, dcol, drow are given
			h.sub("BroadcastAddBackward x %v dx=%v dcol=%v drow=%v", dims, mask&1 != 0, mask&2 != 0, mask&4 != 0)
			dy := h.normal(dims...)
			var dx, dcol, drow *pair
			if mask&1 != 0 {
				dx = h.grad(dims...)
			}
			if mask&2 != 0 {
				dcol = h.grad(colDims...)
			}
			if mask&4 != 0 {
				drow = h.grad(rowDims...)
			}
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) {
				kernelsOf(be).broadcastAdd.Backward(T(dx), T(dcol), T(drow), T(dy))
			})
			h.acc("dx", dx, h.tol.Elem)
			h.acc("dcol", dcol, h.tol.Elem)
			h.acc("drow", drow, h.tol.Elem)
		}
	}
}

func casePrependRow(h *harness) {
	for _, dims := range [][3]int{{1, 1, 1}, {3, 7, 5}, {2, 33, 130}, {4, 1, 384}} {
		B, N, hd := dims[0], dims[1], dims[2]
		h.sub("PrependRow x (%d, %d, %d)", B, N, hd)
		x, row, y := h.normal(B, N, hd), h.normal(hd), h.garbage(B, N+1, hd)
		h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { kernelsOf(be).prependRow(T(y), T(x), T(row)) })
		h.out("y", y, 0)
	}
	// The mask form (PrependCLS): y (B, N+1) is 2-D, x (B, N), row one
	// element.
	for _, dims := range [][2]int{{1, 1}, {3, 7}, {4, 130}} {
		B, N := dims[0], dims[1]
		for _, v := range []float32{1, 0.5} {
			h.sub("PrependRow mask x (%d, %d) row=%g", B, N, v)
			x, row, y := h.make(h.mask(maskScattered, B, N), B, N), h.make([]float32{v}, 1), h.garbage(B, N+1)
			h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { kernelsOf(be).prependRow(T(y), T(x), T(row)) })
			h.out("y", y, 0)
		}
	}
}

func caseSumSquaresHost(h *harness) {
	sums := func(p *pair) (got, want float64) {
		return h.dut.SumSquaresHost(p.dut), h.ref.SumSquaresHost(p.ref)
	}
	for _, n := range []int{1, 7, 130, 4099, 100003} {
		for _, sd := range []float32{1, 1e25} { // 1e25^2 overflows float32, not float64
			h.sub("SumSquaresHost n=%d sd=%g", n, sd)
			p := h.make(h.normals(n, sd), n)
			got, want := sums(p)
			if math.IsInf(want, 0) || math.IsNaN(want) {
				h.errorf("reference sum %g is not finite", want)
			}
			if d := math.Abs(got - want); !(d <= h.tol.Elem*math.Abs(want)) {
				h.errorf("got %g, want %g (relative error %.3g > %g)", got, want, d/math.Abs(want), h.tol.Elem)
			}
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		note string
		bad  []float32
		want float64
	}{
		{"NaN", []float32{nan}, math.NaN()},
		{"+Inf", []float32{inf}, math.Inf(1)},
		{"-Inf", []float32{-inf}, math.Inf(1)},
		{"NaN and Inf", []float32{inf, nan}, math.NaN()},
	} {
		for _, n := range []int{1, 4099} {
			if n < len(c.bad) {
				continue
			}
			h.sub("SumSquaresHost n=%d with %s", n, c.note)
			xs := h.normals(n, 1)
			for _, v := range c.bad {
				xs[h.rng.IntN(n)] = v
			}
			got, want := sums(h.make(xs, n))
			if math.IsNaN(c.want) != math.IsNaN(want) || (!math.IsNaN(c.want) && want != c.want) {
				h.errorf("reference gives %g, want %g", want, c.want)
			}
			if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && got != want) {
				h.errorf("got %g, want %g", got, want)
			}
		}
	}
}

func caseAdamW(h *harness) {
	for _, n := range []int{1, 7, 130, 4099} {
		for _, decay := range []float32{0, 0.1} {
			h.sub("AdamW n=%d decay=%g, 3 steps", n, decay)
			p, m, v := h.normal(n), h.make(h.normals(n, 0.1), n), h.make(h.uniforms(n, 0, 0.01), n)
			g := h.normal(n)
			const b1, b2 = 0.9, 0.999
			for step := 1; step <= 3; step++ {
				if step > 1 { // a new gradient (AdamW zeroed the last)
					gs := h.normals(n, 1)
					h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.Upload(T(g), gs) })
				}
				s := engine.AdamWStep{
					LR: 1e-2, Beta1: b1, Beta2: b2, Eps: 1e-8, Decay: decay,
					BiasCorr1: float32(1 - math.Pow(b1, float64(step))),
					BiasCorr2: float32(1 - math.Pow(b2, float64(step))),
				}
				h.both(func(be engine.Backend, T func(*pair) *engine.Tensor) { be.AdamW(T(p), T(g), T(m), T(v), s) })
				h.exact(fmt.Sprintf("gradient after step %d (must be zeroed)", step), g.dut.ToHost(), make([]float32, n))
			}
			// Compared as changes from the start: an update of 1e-2 must be
			// right to rtol, not only p.
			h.acc("p", p, h.tol.Elem)
			h.acc("m", m, h.tol.Elem)
			h.acc("v", v, h.tol.Elem)
		}
	}
}

// checkDeterminism runs attention (forward and backward), the reductions
// and the kernels that sum over rows twice on be with the same inputs and
// asks for bit-identical results.
func checkDeterminism(r reporter, be engine.Backend) {
	r.Helper()
	tp := engine.NewTape(be)
	run := func() map[string][]float32 {
		tp.Reset()
		rng := rand.New(rand.NewPCG(7, 11))
		normals := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			return x
		}
		out := map[string][]float32{}
		const B, Nq, Nk, heads, dh = 3, 33, 65, 4, 32
		hd := heads * dh
		mk := make([]float32, B*Nk)
		for i := range mk {
			if rng.Float32() < 0.7 && i/Nk != B-1 {
				mk[i] = 1
			}
		}
		mk[0] = 1
		ks, vs := normals(B*Nk*hd), normals(B*Nk*hd)
		poison(ks, mk, B, Nk, hd)
		poison(vs, mk, B, Nk, hd)
		q, k, v := tp.Input(normals(B*Nq*hd), B, Nq, hd), tp.Input(ks, B, Nk, hd), tp.Input(vs, B, Nk, hd)
		mask := tp.Input(mk, B, Nk)
		o, lse := tp.Input(make([]float32, B*Nq*hd), B, Nq, hd), tp.Input(make([]float32, B*heads*Nq), B, heads, Nq)
		kernelsOf(be).attention.Forward(o, lse, q, k, v, mask, heads)
		do := tp.Input(normals(B*Nq*hd), B, Nq, hd)
		dq, dk, dv := tp.Input(normals(B*Nq*hd), B, Nq, hd), tp.Input(normals(B*Nk*hd), B, Nk, hd), tp.Input(normals(B*Nk*hd), B, Nk, hd)
		kernelsOf(be).attention.Backward(dq, dk, dv, do, q, k, v, mask, o, lse, heads)
		for name, t := range map[string]*engine.Tensor{"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv} {
			out["Attention "+name] = t.ToHost()
		}

		const n = 100003
		x, y := tp.Input(normals(n), n), tp.Input([]float32{0}, 1)
		for _, op := range []engine.ReduceOp{engine.ReduceSum, engine.ReduceSumSquares} {
			be.Reduce(op, y, x)
			out[fmt.Sprintf("Reduce %d", op)] = y.ToHost()
		}
		ss := math.Float64bits(be.SumSquaresHost(x))
		out["SumSquaresHost"] = []float32{math.Float32frombits(uint32(ss >> 32)), math.Float32frombits(uint32(ss))}

		const M, hh = 1030, 384
		xm, w, dy := tp.Input(normals(M*hh), M, hh), tp.Input(normals(hh), hh), tp.Input(normals(M*hh), M, hh)
		ym, rstd := tp.Input(make([]float32, M*hh), M, hh), tp.Input(make([]float32, M), M)
		kernelsOf(be).rmsNorm.Forward(ym, rstd, xm, w, 1e-5)
		dx, dw := tp.Input(normals(M*hh), M, hh), tp.Input(normals(hh), hh)
		kernelsOf(be).rmsNorm.Backward(dx, dw, dy, xm, w, rstd)
		out["RMSNormBackward dw"], out["RMSNormBackward dx"] = dw.ToHost(), dx.ToHost()
		dsum := tp.Input(normals(hh), hh)
		be.Copy2D(dsum, 0, 0, dy, 0, hh, M, hh, true)
		out["Copy2D dstLd 0"] = dsum.ToHost()
		drow, dcol := tp.Input(normals(hh), 1, hh), tp.Input(normals(M), 1, M)
		kernelsOf(be).broadcastAdd.Backward(nil, dcol, drow, tp.Input(dy.ToHost(), 1, M, hh))
		out["BroadcastAddBackward drow"], out["BroadcastAddBackward dcol"] = drow.ToHost(), dcol.ToHost()
		db, bs := tp.Input([]float32{0.5}, 1), tp.Input([]float32{1.5}, 1)
		be.BinaryBackward(engine.BinaryMul, nil, db, dy, xm, bs)
		out["BinaryBackward scalar db"] = db.ToHost()
		const nb, nc = 64, 1030
		ps := make([]float32, nb*nc)
		for b := range nb {
			ps[b*nc+rng.IntN(nc)] = 1
		}
		scores, pos, loss := tp.Input(normals(nb*nc), nb, nc), tp.Input(ps, nb, nc), tp.Input([]float32{0}, 1)
		kernelsOf(be).infoNCE.Forward(loss, scores, pos)
		ds := tp.Input(normals(nb*nc), nb, nc)
		kernelsOf(be).infoNCE.Backward(ds, tp.Input([]float32{0.7}, 1), scores, pos)
		out["InfoNCE"], out["InfoNCEBackward"] = loss.ToHost(), ds.ToHost()
		c := tp.Input(normals(M*hh), M, hh)
		be.Gemm(false, true, 1, M, hh, hh, 1, xm, tp.Input(normals(hh*hh), hh, hh), 0.5, c)
		out["Gemm"] = c.ToHost()
		lmDeterminism(be, tp, normals, rng.IntN, out)
		spanDeterminism(be, tp, normals, out)
		if err := tp.Err(); err != nil {
			r.Errorf("tape: %v", err)
		}
		if err := engine.Sync(be); err != nil {
			r.Errorf("backend error: %v", err)
		}
		return out
	}
	first, second := run(), run()
	names := make([]string, 0, len(first))
	for name := range first {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a, b := first[name], second[name]
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				r.Errorf("%s: run 2 differs at %d: %g (bits %08x), run 1 %g (bits %08x)", name, i, b[i], math.Float32bits(b[i]), a[i], math.Float32bits(a[i]))
				break
			}
		}
	}
	tp.Reset()
}

// newCPU returns a CPU backend or fails the test.
func newCPU(t *testing.T, cfg cpu.Config) *cpu.Backend {
	t.Helper()
	c, err := cpu.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCrossCheckCPU validates the harness: the CPU backend against itself
// with one worker and with GOMAXPROCS workers must pass, as must OpenBLAS
// against gonum's pure-Go SGEMM (different summation orders: a check of the
// fp32 tolerance on real rounding differences).
func TestCrossCheckCPU(t *testing.T) {
	ref := newCPU(t, cpu.Config{Workers: 1})
	t.Run("workers", func(t *testing.T) {
		checkBackendOps(t, ref, newCPU(t, cpu.Config{}), fp32Tol)
	})
	t.Run("gonum", func(t *testing.T) {
		checkBackendOps(t, ref, newCPU(t, cpu.Config{Workers: 2, BLAS: blas.Gonum()}), fp32Tol)
	})
}

// TestCrossCheckDeterminismCPU runs the determinism check on the CPU.
func TestCrossCheckDeterminismCPU(t *testing.T) {
	checkDeterminism(t, newCPU(t, cpu.Config{}))
}

// TestCrossCheckCompare checks that compareValues reports what it must.
func TestCrossCheckCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]float32, 1000)
	for i := range want {
		want[i] = float32(rng.NormFloat64())
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	perturb := func(i int, v float32) []float32 {
		g := slices.Clone(want)
		g[i] = v
		return g
	}
	scale := float32(0)
	for _, v := range want {
		scale = max(scale, float32(math.Abs(float64(v))))
	}
	base := make([]float32, len(want))
	for i := range base {
		base[i] = want[i] - 1e-3*float32(rng.NormFloat64()) // a small accumulated change
	}
	for _, c := range []struct {
		name     string
		got      []float32
		want     []float32
		base     []float32
		rtol     float64
		mismatch bool
	}{
		{"equal", want, want, nil, 1e-4, false},
		{"equal, rtol 0", want, want, nil, 0, false},
		{"within tolerance", perturb(3, want[3]+0.5e-4*scale), want, nil, 1e-4, false},
		{"one entry 2x over", perturb(3, want[3]+2e-4*scale), want, nil, 1e-4, true},
		{"one ulp, rtol 0", perturb(5, math.Nextafter32(want[5], 10)), want, nil, 0, true},
		{"NaN for a finite value", perturb(7, nan), want, nil, 1e-4, true},
		{"+Inf for a finite value", perturb(7, inf), want, nil, 1e-4, true},
		{"NaN matched", perturb(9, nan), perturb(9, nan), nil, 1e-4, false},
		{"-Inf matched", perturb(9, -inf), perturb(9, -inf), nil, 1e-4, false},
		{"-Inf for +Inf", perturb(9, -inf), perturb(9, inf), nil, 1e-4, true},
		{"finite for -Inf", perturb(9, 0), perturb(9, -inf), nil, 1e-4, true},
		// Accumulated: the scale is the change (about 3e-3), not the values
		// (about 3): an error of 1e-5 is 3e-3 relative to what was added.
		{"accumulated, error small next to values but not the change", perturb(11, want[11]+1e-5), want, base, 1e-4, true},
		{"accumulated, within tolerance of the change", perturb(11, want[11]+1e-7), want, base, 1e-4, false},
		{"accumulated, overwritten instead", func() []float32 {
			g := make([]float32, len(want))
			for i := range g {
				g[i] = want[i] - base[i]
			}
			return g
		}(), want, base, 1e-4, true},
		{"length", want[:999], want, nil, 1e-4, true},
	} {
		_, msg := compareValues(c.got, c.want, c.base, c.rtol)
		if (msg != "") != c.mismatch {
			t.Errorf("%s: compareValues = %q, want mismatch %v", c.name, msg, c.mismatch)
		} else if msg != "" {
			t.Logf("%s: %s", c.name, msg)
		}
	}
}

// The fused kernels of be, for calling them directly; a backend without one
// is a harness error.
func fused[K any](be engine.Backend, name string) K {
	k, err := engine.KernelOf[K](be, name)
	if err != nil {
		panic(err)
	}
	return k
}

// kernelSet is a backend's fused kernels, for calling them directly.
type kernelSet struct {
	rmsNorm      engine.RMSNormKernels
	attention    engine.AttentionKernels
	swiglu       engine.SwiGLUKernels
	scaleRows    engine.ScaleRowsKernel
	meanPool     engine.MeanPoolKernels
	l2Normalize  engine.L2NormalizeKernels
	rowReduce    engine.RowReduceKernels
	infoNCE      engine.InfoNCEKernels
	broadcastAdd engine.BroadcastAddKernels
	prependRow   engine.PrependRowKernel
}

// kernelsOf looks up be's fused kernels.
func kernelsOf(be engine.Backend) kernelSet {
	return kernelSet{
		rmsNorm:      fused[engine.RMSNormKernels](be, engine.KernelRMSNorm),
		attention:    fused[engine.AttentionKernels](be, engine.KernelAttention),
		swiglu:       fused[engine.SwiGLUKernels](be, engine.KernelSwiGLU),
		scaleRows:    fused[engine.ScaleRowsKernel](be, engine.KernelScaleRows),
		meanPool:     fused[engine.MeanPoolKernels](be, engine.KernelMeanPool),
		l2Normalize:  fused[engine.L2NormalizeKernels](be, engine.KernelL2Normalize),
		rowReduce:    fused[engine.RowReduceKernels](be, engine.KernelRowReduce),
		infoNCE:      fused[engine.InfoNCEKernels](be, engine.KernelInfoNCE),
		broadcastAdd: fused[engine.BroadcastAddKernels](be, engine.KernelBroadcastAdd),
		prependRow:   fused[engine.PrependRowKernel](be, engine.KernelPrependRow),
	}
}

// brokenBackend is the CPU with one deliberate fault, for checking that the
// harness catches it.
type brokenBackend struct {
	engine.Backend
	fault string
}

func (b *brokenBackend) Unwrap() engine.Backend { return b.Backend }

func (b *brokenBackend) Gemm(tA, tB bool, batch, m, n, k int, alpha float32, a, bm *engine.Tensor, beta float32, c *engine.Tensor) {
	if b.fault == "Gemm ignores beta" {
		beta = 0
	}
	b.Backend.Gemm(tA, tB, batch, m, n, k, alpha, a, bm, beta, c)
}

func (b *brokenBackend) Copy2D(dst *engine.Tensor, dstOff, dstLd int, src *engine.Tensor, srcOff, srcLd int, rows, cols int, accumulate bool) {
	if b.fault == "Copy2D ignores accumulate" && dstLd != 0 {
		accumulate = false
	}
	b.Backend.Copy2D(dst, dstOff, dstLd, src, srcOff, srcLd, rows, cols, accumulate)
}

func (b *brokenBackend) SumSquaresHost(x *engine.Tensor) float64 {
	s := b.Backend.SumSquaresHost(x)
	if b.fault == "SumSquaresHost 1e-3 off" {
		s *= 1 + 1e-3
	}
	return s
}

func (b *brokenBackend) AdamW(p, g, m, v *engine.Tensor, s engine.AdamWStep) {
	if b.fault == "AdamW keeps g" {
		keep := g.ToHost()
		b.Backend.AdamW(p, g, m, v, s)
		b.Backend.Upload(g, keep)
		return
	}
	b.Backend.AdamW(p, g, m, v, s)
}

// Kernel is the wrapped backend's fused kernel, with the fault put in when
// it is one of the kernel's.
func (b *brokenBackend) Kernel(name string) any {
	inner := b.Backend
	switch k := inner.Kernel(name).(type) {
	case engine.AttentionKernels:
		fwd, bwd := k.Forward, k.Backward
		if b.fault == "Attention ignores the mask" {
			k.Forward = func(o, lse, q, kk, v, mask *engine.Tensor, heads int) { fwd(o, lse, q, kk, v, nil, heads) }
		}
		if b.fault == "AttentionBackward drops dv" {
			k.Backward = func(dq, dk, dv, do, q, kk, v, mask, o, lse *engine.Tensor, heads int) {
				bwd(dq, dk, nil, do, q, kk, v, mask, o, lse, heads)
			}
		}
		return k
	case engine.SwiGLUKernels:
		if bwd := k.Backward; b.fault == "SwiGLUBackward ignores accUp" {
			k.Backward = func(dg, du, dy, g, u *engine.Tensor, accGate, _ bool) { bwd(dg, du, dy, g, u, accGate, false) }
		}
		return k
	case engine.MeanPoolKernels:
		if bwd := k.Backward; b.fault == "MeanPoolBackward overwrites" {
			k.Backward = func(dx, dy, mask *engine.Tensor) {
				inner.Fill(dx, 0)
				bwd(dx, dy, mask)
			}
		}
		return k
	case engine.RowReduceKernels:
		if fwd := k.Forward; b.fault == "RowReduce 1e-3 off" {
			k.Forward = func(op engine.RowOp, y, x *engine.Tensor) {
				fwd(op, y, x)
				inner.Axpy(y, 1e-3, y)
			}
		}
		return k
	case engine.L2NormalizeKernels:
		if bwd := k.Backward; b.fault == "L2NormalizeBackward without the clamp" {
			k.Backward = func(dx, dy, y, norm *engine.Tensor, _ float32) { bwd(dx, dy, y, norm, 0) }
		}
		return k
	case engine.BroadcastAddKernels:
		if bwd := k.Backward; b.fault == "BroadcastAddBackward drops drow" {
			k.Backward = func(dx, dcol, _, dy *engine.Tensor) { bwd(dx, dcol, nil, dy) }
		}
		return k
	case engine.InfoNCEKernels:
		if bwd := k.Backward; b.fault == "InfoNCEBackward ignores dy" {
			k.Backward = func(ds, _, scores, pos *engine.Tensor) {
				one := engine.NewTape(inner).Input([]float32{1}, 1)
				bwd(ds, one, scores, pos)
			}
		}
		return k
	default:
		return brokenLMKernel(inner, b.fault, k)
	}
}

// recorder is a reporter that keeps what is reported.
type recorder struct{ errs []string }

func (r *recorder) Helper()                         {}
func (r *recorder) Logf(format string, args ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCrossCheckDetectsFaults runs the harness against CPU backends with one
// deliberate fault each: the op case of that method, and only it, must fail.
func TestCrossCheckDetectsFaults(t *testing.T) {
	ref := newCPU(t, cpu.Config{Workers: 1})
	for _, c := range []struct{ fault, opCase string }{
		{"Gemm ignores beta", "Gemm,LMTape"}, // the cross-entropy backward accumulates by beta 1
		{"Attention ignores the mask", "Attention"},
		{"AttentionBackward drops dv", "Attention"},
		{"SwiGLUBackward ignores accUp", "SwiGLU"},
		{"MeanPoolBackward overwrites", "MeanPool"},
		{"RowReduce 1e-3 off", "RowReduce"},
		{"L2NormalizeBackward without the clamp", "L2Normalize"},
		{"BroadcastAddBackward drops drow", "BroadcastAdd"},
		{"Copy2D ignores accumulate", "Copy2D"},
		{"SumSquaresHost 1e-3 off", "SumSquaresHost"},
		{"AdamW keeps g", "AdamW"},
		{"InfoNCEBackward ignores dy", "InfoNCE"},
		{"RoPEBackward overwrites", "RoPE"},
		{"CausalAttentionBackward drops dk", "CausalAttention,LMTape"},
		{"EmbeddingBackward overwrites", "Embedding,LMTape"},
		{"CrossEntropyBackward ignores dy", "CrossEntropy"},
		{"SpanAttention ignores the cache", "SpanAttention"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			dut := &brokenBackend{Backend: newCPU(t, cpu.Config{}), fault: c.fault}
			failed := map[string][]string{}
			expected := strings.Split(c.opCase, ",") // the cases that use the faulty method
			runOpCases(ref, dut, fp32Tol, func(name string, body func(r reporter)) {
				if testing.Short() && !slices.Contains(expected, name) {
					return
				}
				rec := &recorder{}
				body(rec)
				if len(rec.errs) > 0 {
					failed[name] = rec.errs
				}
			})
			for _, want := range expected {
				if len(failed[want]) == 0 {
					t.Errorf("case %s passed despite the fault", want)
				} else {
					t.Logf("%s: %d errors, first: %s", want, len(failed[want]), failed[want][0])
				}
			}
			for name, errs := range failed {
				if !slices.Contains(expected, name) {
					t.Errorf("case %s failed too: %s", name, errs[0])
				}
			}
		})
	}
}
