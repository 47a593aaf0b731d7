package settransformer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/losses/ot"
)

// TestUnmixMatchesOracle: for every OT variant, the engine's H_hat, A_hat (rows at the real rows'
// positions, zero at padded ones), loss, every loss term and every parameter gradient equal the
// gorgonia float64 oracle's with the same weights. The oracle sees each example's real rows
// alone, so this also checks the masking, the row packing and the slot broadcast.
//
// The last case is OT alone, so that its gradient is not checked only underneath the larger
// cycle term's.
func TestUnmixMatchesOracle(t *testing.T) {
	otOnly := testUnmixLoss(ot.Balanced)
	otOnly.WCyc, otOnly.LambdaA, otOnly.WNorm = 0, 0, 0
	for _, loss := range []ot.Config{testUnmixLoss(ot.Balanced), testUnmixLoss(ot.Dustbin), testUnmixLoss(ot.Unbalanced), otOnly} {
		v := loss.Variant
		name := string(v)
		if loss.WCyc == 0 {
			name += "-ot-only"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testUnmixConfig()
			w := testUnmixWeights(t, cfg, loss, 21)
			bt := testUnmixBatch(cfg, 22)
			ref, err := runUnmixOracle(cfg, loss, w, bt, true)
			if err != nil {
				t.Fatal(err)
			}
			m := unmixModelWith(t, cfg, loss, w)
			b, tg := engineUnmixBatch(bt)

			out, err := m.Forward(b)
			if err != nil {
				t.Fatal(err)
			}
			S, d := cfg.Slots, cfg.InputDim
			hHat, aHat := out.HHat.ToHost(), out.AHat.ToHost() // (B, S, d), (B, N, S)
			worstOut := 0.0
			for bi := 0; bi < bt.B; bi++ {
				e := relErr(hHat[bi*S*d:(bi+1)*S*d], ref.HHat[bi])
				worstOut = math.Max(worstOut, e)
				if e > 1e-5 {
					t.Errorf("set %d: H_hat differs from the oracle by %.2e", bi, e)
				}
				r := 0 // index among the real rows
				for i := 0; i < bt.N; i++ {
					row := aHat[(bi*bt.N+i)*S : (bi*bt.N+i+1)*S]
					if !bt.Mask[bi*bt.N+i] {
						if slices.ContainsFunc(row, func(x float32) bool { return x != 0 }) {
							t.Errorf("set %d: padded row %d of A_hat is %v, want 0", bi, i, row)
						}
						continue
					}
					e := relErr(row, ref.AHat[bi][r*S:(r+1)*S])
					worstOut = math.Max(worstOut, e)
					if e > 1e-5 {
						t.Errorf("set %d: A_hat row %d differs from the oracle by %.2e", bi, i, e)
					}
					r++
				}
			}

			m.Params().ZeroGrad()
			total, err := m.ForwardBackward(b, tg)
			if err != nil {
				t.Fatal(err)
			}
			parts := m.LossParts()
			lossErr := math.Abs(float64(total)-ref.Loss) / math.Abs(ref.Loss)
			if lossErr > 1e-5 {
				t.Errorf("loss %.8g, oracle %.8g (relative error %.2e)", total, ref.Loss, lossErr)
			}
			for k := range parts {
				if _, ok := ref.Parts[k]; !ok {
					t.Errorf("term %s of weight 0 was reported", k)
				}
			}
			for k, want := range ref.Parts {
				got, ok := parts[k]
				if !ok {
					t.Errorf("term %s missing from %v", k, parts)
					continue
				}
				if e := math.Abs(got-want) / math.Abs(want); e > 1e-5 {
					t.Errorf("term %s = %.8g, oracle %.8g (relative error %.2e)", k, got, want, e)
				}
			}
			worst, worstName := 0.0, ""
			for _, pv := range m.Params().Views() {
				e := relErr(pv.Tensor.Grad().ToHost(), ref.Grads[pv.Name])
				if e > worst {
					worst, worstName = e, pv.Name
				}
				if e > 1e-4 {
					t.Errorf("gradient of %s differs from the oracle by %.2e (relative to its largest entry)", pv.Name, e)
				}
			}
			t.Logf("%s: loss %.6f (oracle %.6f, rel err %.1e), terms %v; outputs worst rel err %.1e; worst gradient rel err %.2e (%s) over %d tensors",
				name, total, ref.Loss, lossErr, fmtParts(ref.Parts), worstOut, worst, worstName, len(m.Params().Views()))
		})
	}
}

func fmtParts(p map[string]float64) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%.4f ", k, p[k])
	}
	return strings.TrimSpace(sb.String())
}

// TestUnmixOracleFiniteDifferences checks the unmix oracle itself against central differences of
// its own float64 forward pass: the derivative along one random direction over all parameters,
// and along random directions within the tensors that only the unmix model has (slots, the
// decoder's cross-attention, the heads, the dustbin score), equals the gradient's dot product
// with the direction.
func TestUnmixOracleFiniteDifferences(t *testing.T) {
	// The dustbin variant runs every op the other variants use (and the dustbin score); one
	// variant keeps the test short.
	for _, v := range []ot.Variant{ot.Dustbin} {
		cfg, loss := testUnmixConfig(), testUnmixLoss(v)
		w := testUnmixWeights(t, cfg, loss, 23)
		bt := testUnmixBatch(cfg, 24)
		ref, err := runUnmixOracle(cfg, loss, w, bt, true)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for name := range w {
			all = append(all, name)
		}
		slices.Sort(all)
		groups := [][]string{all, {"slots"}, {"dec.layers.1.cross_attn.k_proj.weight"}, {"dec.layers.0.cross_norm.weight"},
			{"row_head.weight"}, {"mix_head.q.weight"}, {ot.DustbinParamName}}
		rng := rand.New(rand.NewPCG(25, 25))
		worst := checkDirectional(t, string(v), w, ref.Grads, groups, rng, func(moved map[string][]float64) float64 {
			res, err := runUnmixOracle(cfg, loss, moved, bt, false)
			if err != nil {
				t.Fatal(err)
			}
			return res.Loss
		})
		t.Logf("%s: loss %.6f, %d directions, worst relative FD error %.2e", v, ref.Loss, len(groups), worst)
	}
}

// permuteBatch shuffles the rows of every set of b together with the mask; perm[s][i] is the
// original row now at position i.
func permuteBatch(b Batch, d int, rng *rand.Rand) (Batch, [][]int) {
	pb := Batch{B: b.B, N: b.N, U: make([]float32, len(b.U)), Mask: make([]float32, len(b.Mask))}
	perm := make([][]int, b.B)
	for s := range perm {
		perm[s] = rng.Perm(b.N)
		for i, src := range perm[s] {
			copy(pb.U[(s*b.N+i)*d:(s*b.N+i+1)*d], b.U[(s*b.N+src)*d:(s*b.N+src+1)*d])
			pb.Mask[s*b.N+i] = b.Mask[s*b.N+src]
		}
	}
	return pb, perm
}

// gradsOf copies every parameter gradient to the host, in view order.
func gradsOf(ps *engine.Params) [][]float32 {
	var g [][]float32
	for _, v := range ps.Views() {
		g = append(g, v.Tensor.Grad().ToHost())
	}
	return g
}

// closeRel reports whether got and want agree to tol relative to want's largest entry.
func closeRel(got, want []float32, tol float64) bool {
	var scale float64
	for _, x := range want {
		scale = math.Max(scale, math.Abs(float64(x)))
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*math.Max(scale, 1e-30) {
			return false
		}
	}
	return true
}

// TestUnmixPermutationEquivariance: shuffling the rows of U together with the mask permutes the
// rows of A_hat and the encoder states the same way and leaves H_hat (slot order included), the
// slot states, the loss, its terms and every gradient unchanged.
func TestUnmixPermutationEquivariance(t *testing.T) {
	cfg, loss := testUnmixConfig(), testUnmixLoss(ot.Balanced)
	w := testUnmixWeights(t, cfg, loss, 31)
	bt := testUnmixBatch(cfg, 32)
	m := unmixModelWith(t, cfg, loss, w)
	b, tg := engineUnmixBatch(bt)
	d, S, h := cfg.InputDim, cfg.Slots, cfg.Hidden

	out, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	hHat, aHat, rows := out.HHat.ToHost(), out.AHat.ToHost(), out.Rows.ToHost()
	m.Params().ZeroGrad()
	l, err := m.ForwardBackward(b, tg)
	if err != nil {
		t.Fatal(err)
	}
	parts := m.LossParts()
	grads := gradsOf(m.Params())

	pb, perm := permuteBatch(b, d, rand.New(rand.NewPCG(33, 34)))
	pout, err := m.Forward(pb)
	if err != nil {
		t.Fatal(err)
	}
	const tol = 1e-5
	if !closeRel(pout.HHat.ToHost(), hHat, tol) {
		t.Error("H_hat changed under a row shuffle")
	}
	paHat, prows := pout.AHat.ToHost(), pout.Rows.ToHost()
	for s := 0; s < b.B; s++ {
		for i, src := range perm[s] {
			if !closeRel(paHat[(s*b.N+i)*S:(s*b.N+i+1)*S], aHat[(s*b.N+src)*S:(s*b.N+src+1)*S], tol) {
				t.Fatalf("set %d: A_hat row %d (was row %d) is not the permuted row", s, i, src)
			}
			if b.Mask[s*b.N+src] == 1 && !closeRel(prows[(s*b.N+i)*h:(s*b.N+i+1)*h], rows[(s*b.N+src)*h:(s*b.N+src+1)*h], tol) {
				t.Fatalf("set %d: encoder state of row %d (was row %d) is not the permuted one", s, i, src)
			}
		}
	}
	m.Params().ZeroGrad()
	pl, err := m.ForwardBackward(pb, tg)
	if err != nil {
		t.Fatal(err)
	}
	pparts := m.LossParts()
	if math.Abs(float64(pl-l)) > 1e-5*math.Abs(float64(l)) {
		t.Errorf("loss %v after a row shuffle, %v before", pl, l)
	}
	for k, v := range parts {
		if math.Abs(pparts[k]-v) > 1e-5*math.Abs(v) {
			t.Errorf("term %s = %v after a row shuffle, %v before", k, pparts[k], v)
		}
	}
	for i, g := range gradsOf(m.Params()) {
		if !closeRel(g, grads[i], 1e-4) {
			t.Errorf("gradient of %s changed under a row shuffle", m.Params().Views()[i].Name)
		}
	}
}

// TestUnmixPaddingChangesNothing: three more padded rows of U holding NaN and Inf, and two more
// padded clean rows holding large finite junk, change neither H_hat, the real rows of A_hat, the
// loss, its terms nor any gradient.
func TestUnmixPaddingChangesNothing(t *testing.T) {
	cfg, loss := testUnmixConfig(), testUnmixLoss(ot.Dustbin)
	w := testUnmixWeights(t, cfg, loss, 41)
	bt := testUnmixBatch(cfg, 42)
	m := unmixModelWith(t, cfg, loss, w)
	d, S := cfg.InputDim, cfg.Slots
	b, tg := engineUnmixBatch(bt)

	run := func(b Batch, tg UnmixTargets) (hHat, aHat []float32, l float32, parts map[string]float64, grads [][]float32) {
		out, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		hHat, aHat = out.HHat.ToHost(), out.AHat.ToHost()
		m.Params().ZeroGrad()
		if l, err = m.ForwardBackward(b, tg); err != nil {
			t.Fatal(err)
		}
		parts = m.LossParts()
		return hHat, aHat, l, parts, gradsOf(m.Params())
	}
	hHat, aHat, l, parts, grads := run(b, tg)

	const extraU, extraH = 3, 2
	N2, NH2 := b.N+extraU, bt.NH+extraH
	b2 := Batch{B: b.B, N: N2, U: make([]float32, b.B*N2*d), Mask: make([]float32, b.B*N2)}
	for s := 0; s < b.B; s++ {
		for i := 0; i < N2; i++ {
			dst := b2.U[(s*N2+i)*d : (s*N2+i+1)*d]
			if i < b.N && b.Mask[s*b.N+i] == 1 {
				copy(dst, b.U[(s*b.N+i)*d:(s*b.N+i+1)*d])
				b2.Mask[s*N2+i] = 1
				continue
			}
			for j := range dst {
				dst[j] = float32(math.NaN())
				if j%2 == 1 {
					dst[j] = float32(math.Inf(-1))
				}
			}
		}
	}
	tg2 := UnmixTargets{H: make([]float32, b.B*NH2*d), CleanRows: tg.CleanRows, MeanNorm: tg.MeanNorm}
	for s := 0; s < b.B; s++ {
		copy(tg2.H[s*NH2*d:], tg.H[s*bt.NH*d:(s*bt.NH+tg.CleanRows[s])*d])
		for i := tg.CleanRows[s] * d; i < NH2*d; i++ {
			tg2.H[s*NH2*d+i] = 1e3
		}
	}
	hHat2, aHat2, l2, parts2, grads2 := run(b2, tg2)

	if !closeRel(hHat2, hHat, 1e-6) {
		t.Error("H_hat changed with other padding")
	}
	for s := 0; s < b.B; s++ {
		for i := 0; i < b.N; i++ {
			if b.Mask[s*b.N+i] == 1 && !closeRel(aHat2[(s*N2+i)*S:(s*N2+i+1)*S], aHat[(s*b.N+i)*S:(s*b.N+i+1)*S], 1e-5) {
				t.Errorf("set %d: A_hat row %d changed with other padding", s, i)
			}
		}
		for i := b.N; i < N2; i++ {
			if slices.ContainsFunc(aHat2[(s*N2+i)*S:(s*N2+i+1)*S], func(x float32) bool { return x != 0 }) {
				t.Errorf("set %d: padded A_hat row %d is not zero", s, i)
			}
		}
	}
	if math.Abs(float64(l2-l)) > 1e-6*math.Abs(float64(l)) {
		t.Errorf("loss %v with other padding, %v without", l2, l)
	}
	for k, v := range parts {
		if math.Abs(parts2[k]-v) > 1e-6*math.Abs(v) {
			t.Errorf("term %s = %v with other padding, %v without", k, parts2[k], v)
		}
	}
	for i, g := range grads2 {
		if !closeRel(g, grads[i], 1e-5) {
			t.Errorf("gradient of %s changed with other padding", m.Params().Views()[i].Name)
		}
	}
}

// TestUnmixParamNames: the unmix model has exactly the SPEC §4 names (no CLS), a dustbin loss adds
// only ot.dustbin_score, and the retrieval model keeps its CLS vector.
func TestUnmixParamNames(t *testing.T) {
	cfg := testUnmixConfig()
	specs, err := ParamSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, fmt.Sprint(s.Name, s.Shape))
	}
	want := []string{"in_proj.weight[16 12]"}
	block := func(p string, cross bool) {
		attn := func(sub string) {
			for _, x := range []string{"q", "k", "v", "o"} {
				want = append(want, p+sub+"."+x+"_proj.weight[16 16]")
			}
		}
		want = append(want, p+"attn_norm.weight[16]")
		attn("attn")
		if cross {
			want = append(want, p+"cross_norm.weight[16]")
			attn("cross_attn")
		}
		want = append(want, p+"mlp_norm.weight[16]", p+"mlp.gate_proj.weight[24 16]", p+"mlp.up_proj.weight[24 16]", p+"mlp.down_proj.weight[16 24]")
	}
	for i := 0; i < 2; i++ {
		block(fmt.Sprintf("layers.%d.", i), false)
	}
	want = append(want, "norm.weight[16]", "slots[4 16]")
	for i := 0; i < 2; i++ {
		block(fmt.Sprintf("dec.layers.%d.", i), true)
	}
	want = append(want, "dec.norm.weight[16]", "row_head.weight[12 16]", "mix_head.q.weight[16 16]", "mix_head.k.weight[16 16]")
	if !slices.Equal(got, want) {
		t.Errorf("unmix parameters:\n got %v\nwant %v", got, want)
	}

	be := testBackend(t)
	plain, err := NewUnmix(be, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	withBin, err := NewUnmix(be, cfg, 1, WithLoss(testUnmixLoss(ot.Dustbin)))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := len(plain.Params().Views()), len(withBin.Params().Views()); b != a+1 {
		t.Errorf("dustbin loss: %d parameters, want %d + 1", b, a)
	}
	score, err := withBin.Param(ot.DustbinParamName)
	if err != nil || len(score) != 1 || score[0] != 1.5 {
		t.Errorf("dustbin score %v (%v), want [1.5]", score, err)
	}
	if _, err := NewUnmix(be, cfg, 1, WithLoss(testUnmixLoss(ot.Balanced))); err != nil {
		t.Error(err)
	}
	if n := len(plain.Params().Views()); n != len(specs) {
		t.Errorf("model has %d parameters, ParamSpecs %d", n, len(specs))
	}
	if slices.ContainsFunc(plain.Params().Views(), func(v engine.ParamView) bool { return v.Name == "cls" }) {
		t.Error("unmix model has a cls parameter")
	}
	rspecs, _ := ParamSpecs(testConfig())
	if !slices.ContainsFunc(rspecs, func(s ParamSpec) bool { return s.Name == "cls" }) {
		t.Error("retrieval model lost its cls parameter")
	}
}

// TestUnmixRejects: wrong tasks, an invalid loss, training a model built without a loss,
// malformed targets, a set without real rows and the CLS entry point of an unmix encoder are
// errors, not panics.
func TestUnmixRejects(t *testing.T) {
	be := testBackend(t)
	cfg := testUnmixConfig()
	if _, err := New(be, cfg, 1); err == nil {
		t.Error("New accepted an unmix config")
	}
	if _, err := NewUnmix(be, testConfig(), 1); err == nil {
		t.Error("NewUnmix accepted a retrieval config")
	}
	bad := testUnmixLoss(ot.Balanced)
	bad.Iters = 0
	if _, err := NewUnmix(be, cfg, 1, WithLoss(bad)); err == nil {
		t.Error("NewUnmix accepted an invalid loss config")
	}
	plain, err := NewUnmix(be, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	bt := testUnmixBatch(cfg, 51)
	b, tg := engineUnmixBatch(bt)
	if _, err := plain.ForwardBackward(b, tg); err == nil || !strings.Contains(err.Error(), "WithLoss") {
		t.Errorf("training a model built without a loss: %v", err)
	}
	m, err := NewUnmix(be, cfg, 1, WithLoss(testUnmixLoss(ot.Balanced)))
	if err != nil {
		t.Fatal(err)
	}
	short := tg
	short.H = tg.H[:len(tg.H)-1]
	if _, err := m.ForwardBackward(b, short); err == nil {
		t.Error("targets of the wrong size accepted")
	}
	few := tg
	few.CleanRows = []int{1, 2}
	if _, err := m.ForwardBackward(b, few); err == nil {
		t.Error("clean-row counts for the wrong batch size accepted")
	}
	empty := Batch{B: b.B, N: b.N, U: b.U, Mask: slices.Clone(b.Mask)}
	clear(empty.Mask[b.N : 2*b.N])
	if _, err := m.ForwardBackward(empty, tg); err == nil {
		t.Error("a set without real rows accepted")
	}
	if _, err := m.Forward(Batch{B: 1, N: 2, U: make([]float32, 5)}); err == nil {
		t.Error("U of the wrong size accepted")
	}
	tp := engine.NewTape(be)
	u := tp.Input(make([]float32, 2*cfg.InputDim), 1, 2, cfg.InputDim)
	if _, _, err := m.Encoder().Forward(tp, u, nil); err == nil {
		t.Error("CLS entry point of an unmix encoder ran")
	}
}

// TestUnmixLossPartsOnDemand: ForwardBackward reads one value back to the host (the total loss);
// LossParts reads the terms when asked, their total equal to it, and gives nil before any
// ForwardBackward and after Forward reuses the tape.
func TestUnmixLossPartsOnDemand(t *testing.T) {
	cfg, loss := testUnmixConfig(), testUnmixLoss(ot.Balanced)
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewUnmix(be, cfg, 1, WithLoss(loss))
	if err != nil {
		t.Fatal(err)
	}
	b, tg := engineUnmixBatch(testUnmixBatch(cfg, 61))
	if p := m.LossParts(); p != nil {
		t.Fatalf("loss parts %v before any ForwardBackward", p)
	}
	before := be.HostReads()
	total, err := m.ForwardBackward(b, tg)
	if err != nil {
		t.Fatal(err)
	}
	if n := be.HostReads() - before; n != 1 {
		t.Fatalf("ForwardBackward read %d values back to the host, want 1 (the loss)", n)
	}
	parts := m.LossParts()
	if len(parts) != 5 || math.Abs(parts["unmix"]-float64(total)) > 1e-6*math.Abs(float64(total)) {
		t.Fatalf("loss parts %v for total %v", parts, total)
	}
	if _, err := m.Forward(b); err != nil {
		t.Fatal(err)
	}
	if p := m.LossParts(); p != nil {
		t.Fatalf("loss parts %v after Forward reused the tape", p)
	}
}
