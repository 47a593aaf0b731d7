package settransformer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// testBackend is a CPU backend closed when the test ends.
func testBackend(t testing.TB) engine.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// modelWith builds the model for cfg on the CPU with the weights w copied in.
func modelWith(t testing.TB, cfg Config, w map[string][]float64) *Model {
	t.Helper()
	m, err := New(testBackend(t), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range w {
		if err := m.SetParam(name, toF32(v)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// engineBatch converts the oracle's batch to the model's input.
func engineBatch(bt oracleBatch) (Batch, Targets) {
	mask := make([]float32, len(bt.Mask))
	for i, real := range bt.Mask {
		if real {
			mask[i] = 1
		}
	}
	return Batch{B: bt.B, N: bt.N, U: toF32(bt.U), Mask: mask}, Targets{Candidates: toF32(bt.Cand), Positives: bt.Positives}
}

// relErr is max_i |got_i - want_i| / max_i |want_i|: the error relative to the tensor's scale.
func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i := range want {
		num = math.Max(num, math.Abs(float64(got[i])-want[i]))
		den = math.Max(den, math.Abs(want[i]))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// TestMatchesOracle: the engine model's forward outputs, loss and every parameter gradient equal
// the gorgonia float64 oracle's with the same weights, to float32 round-off.
func TestMatchesOracle(t *testing.T) {
	for _, learn := range []bool{false, true} {
		cfg := testConfig()
		cfg.LearnTemperature = learn
		w := testWeights(t, cfg, 3)
		bt := testBatch(cfg, 4)
		ref, err := runOracle(cfg, w, bt, true)
		if err != nil {
			t.Fatal(err)
		}
		m := modelWith(t, cfg, w)
		b, tg := engineBatch(bt)

		out, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(out.Retrieval.ToHost(), ref.Retrieval); e > 1e-5 {
			t.Errorf("learn_tau=%v: retrieval vectors differ from the oracle by %.2e", learn, e)
		}
		rows := out.Rows.ToHost() // (B, N+1, h)
		h, n := cfg.Hidden, bt.N+1
		for bi := 0; bi < bt.B; bi++ {
			for i := 0; i < n; i++ {
				if i > 0 && !bt.Mask[bi*bt.N+i-1] {
					continue // padded rows are not outputs
				}
				got := rows[(bi*n+i)*h : (bi*n+i+1)*h]
				if e := relErr(got, ref.Rows[bi][i*h:(i+1)*h]); e > 1e-5 {
					t.Errorf("learn_tau=%v: set %d row %d differs from the oracle by %.2e", learn, bi, i, e)
				}
			}
		}

		m.Params().ZeroGrad()
		loss, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatal(err)
		}
		lossErr := math.Abs(float64(loss)-ref.Loss) / math.Abs(ref.Loss)
		if lossErr > 1e-5 {
			t.Errorf("learn_tau=%v: loss %.8g, oracle %.8g (relative error %.2e)", learn, loss, ref.Loss, lossErr)
		}
		worst, worstName := 0.0, ""
		for _, v := range m.Params().Views() {
			e := relErr(v.Tensor.Grad().ToHost(), ref.Grads[v.Name])
			if e > worst {
				worst, worstName = e, v.Name
			}
			if e > 1e-4 {
				t.Errorf("learn_tau=%v: gradient of %s differs from the oracle by %.2e (relative to its largest entry)", learn, v.Name, e)
			}
		}
		t.Logf("learn_tau=%v: loss %.6f (oracle %.6f, rel err %.1e); worst gradient rel err %.2e (%s) over %d tensors",
			learn, loss, ref.Loss, lossErr, worst, worstName, len(m.Params().Views()))
	}
}

// TestPermutationEquivariance: shuffling the rows of U together with the mask permutes the encoder
// row states and leaves the CLS state, the retrieval vector and the loss unchanged.
func TestPermutationEquivariance(t *testing.T) {
	cfg := testConfig()
	w := testWeights(t, cfg, 5)
	bt := testBatch(cfg, 6)
	m := modelWith(t, cfg, w)
	b, tg := engineBatch(bt)
	out, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	rows, q := out.Rows.ToHost(), out.Retrieval.ToHost()
	loss, err := m.ForwardBackward(b, tg)
	if err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(11, 12))
	d, h, N, n := cfg.InputDim, cfg.Hidden, bt.N, bt.N+1
	perm := make([][]int, bt.B) // perm[b][i]: the original row now at position i
	pb := Batch{B: b.B, N: N, U: make([]float32, len(b.U)), Mask: make([]float32, len(b.Mask))}
	for bi := range perm {
		perm[bi] = rng.Perm(N)
		for i, src := range perm[bi] {
			copy(pb.U[(bi*N+i)*d:(bi*N+i+1)*d], b.U[(bi*N+src)*d:(bi*N+src+1)*d])
			pb.Mask[bi*N+i] = b.Mask[bi*N+src]
		}
	}
	pout, err := m.Forward(pb)
	if err != nil {
		t.Fatal(err)
	}
	prows, pq := pout.Rows.ToHost(), pout.Retrieval.ToHost()
	const tol = 1e-5
	for bi := 0; bi < bt.B; bi++ {
		for j := 0; j < h; j++ {
			if a, c := rows[bi*n*h+j], prows[bi*n*h+j]; math.Abs(float64(a-c)) > tol {
				t.Fatalf("set %d: CLS state changed under a row shuffle: %v vs %v", bi, a, c)
			}
		}
		for i, src := range perm[bi] {
			if b.Mask[bi*N+src] == 0 {
				continue
			}
			for j := 0; j < h; j++ {
				a, c := rows[(bi*n+src+1)*h+j], prows[(bi*n+i+1)*h+j]
				if math.Abs(float64(a-c)) > tol {
					t.Fatalf("set %d: row %d (now at %d) state %v, was %v", bi, src, i, c, a)
				}
			}
		}
	}
	for i := range q {
		if math.Abs(float64(q[i]-pq[i])) > tol {
			t.Fatalf("retrieval vector changed under a row shuffle: %v vs %v", pq[i], q[i])
		}
	}
	ploss, err := m.ForwardBackward(pb, tg)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(ploss-loss)) > 1e-5*math.Abs(float64(loss)) {
		t.Errorf("loss changed under a row shuffle: %v vs %v", ploss, loss)
	}
}

// TestPaddingChangesNothing: the content of padded rows, and how much padding there is, change
// neither the real rows' states, the retrieval vectors, the loss nor any gradient.
func TestPaddingChangesNothing(t *testing.T) {
	cfg := testConfig()
	w := testWeights(t, cfg, 13)
	bt := testBatch(cfg, 14)
	m := modelWith(t, cfg, w)
	d, h := cfg.InputDim, cfg.Hidden

	run := func(b Batch, tg Targets) (rows, q []float32, loss float32, grads [][]float32) {
		out, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		rows, q = out.Rows.ToHost(), out.Retrieval.ToHost()
		m.Params().ZeroGrad()
		if loss, err = m.ForwardBackward(b, tg); err != nil {
			t.Fatal(err)
		}
		for _, v := range m.Params().Views() {
			grads = append(grads, v.Tensor.Grad().ToHost())
		}
		return
	}
	b, tg := engineBatch(bt)
	rows, q, loss, grads := run(b, tg)

	// Same batch with other junk in the padding, and with three more padded rows per set.
	rng := rand.New(rand.NewPCG(15, 16))
	const extra = 3
	N2 := bt.N + extra
	b2 := Batch{B: b.B, N: N2, U: make([]float32, b.B*N2*d), Mask: make([]float32, b.B*N2)}
	for bi := 0; bi < b.B; bi++ {
		for i := 0; i < N2; i++ {
			dst := b2.U[(bi*N2+i)*d : (bi*N2+i+1)*d]
			if i < bt.N && b.Mask[bi*bt.N+i] == 1 {
				copy(dst, b.U[(bi*bt.N+i)*d:(bi*bt.N+i+1)*d])
				b2.Mask[bi*N2+i] = 1
				continue
			}
			for j := range dst {
				dst[j] = float32(1e3 * rng.NormFloat64())
			}
		}
	}
	rows2, q2, loss2, grads2 := run(b2, tg)

	const tol = 1e-5
	for bi := 0; bi < b.B; bi++ {
		for i := 0; i <= bt.N; i++ {
			if i > 0 && b.Mask[bi*bt.N+i-1] == 0 {
				continue
			}
			for j := 0; j < h; j++ {
				a, c := rows[(bi*(bt.N+1)+i)*h+j], rows2[(bi*(N2+1)+i)*h+j]
				if math.Abs(float64(a-c)) > tol {
					t.Fatalf("set %d row %d: state %v with other padding, was %v", bi, i, c, a)
				}
			}
		}
	}
	for i := range q {
		if math.Abs(float64(q[i]-q2[i])) > tol {
			t.Fatalf("retrieval vector %v with other padding, was %v", q2[i], q[i])
		}
	}
	if math.Abs(float64(loss-loss2)) > 1e-6*math.Abs(float64(loss)) {
		t.Errorf("loss %v with other padding, was %v", loss2, loss)
	}
	for k, v := range m.Params().Views() {
		var scale float64
		for _, g := range grads[k] {
			scale = math.Max(scale, math.Abs(float64(g)))
		}
		for i := range grads[k] {
			if math.Abs(float64(grads[k][i]-grads2[k][i])) > 1e-5*scale {
				t.Fatalf("gradient of %s[%d] = %v with other padding, was %v", v.Name, i, grads2[k][i], grads[k][i])
			}
		}
	}
}

// TestNonFinitePaddingChangesNothing: NaN and Inf in padded rows must not reach the loss or any
// gradient (0 * NaN is NaN, so padded rows have to be zeroed, not multiplied by zero).
func TestNonFinitePaddingChangesNothing(t *testing.T) {
	cfg := testConfig()
	w := testWeights(t, cfg, 17)
	bt := testBatch(cfg, 18)
	m := modelWith(t, cfg, w)
	b, tg := engineBatch(bt)
	grads := func(b Batch) (float32, [][]float32) {
		m.Params().ZeroGrad()
		loss, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatal(err)
		}
		var g [][]float32
		for _, v := range m.Params().Views() {
			g = append(g, v.Tensor.Grad().ToHost())
		}
		return loss, g
	}
	loss, g := grads(b)
	bad := Batch{B: b.B, N: b.N, U: append([]float32(nil), b.U...), Mask: b.Mask}
	d := cfg.InputDim
	for r, real := range b.Mask {
		if real == 0 {
			for j := 0; j < d; j++ {
				bad.U[r*d+j] = float32(math.NaN())
				if j%2 == 1 {
					bad.U[r*d+j] = float32(math.Inf(1))
				}
			}
		}
	}
	loss2, g2 := grads(bad)
	if loss2 != loss {
		t.Errorf("loss %v with NaN/Inf padding, %v without", loss2, loss)
	}
	for k, v := range m.Params().Views() {
		for i := range g[k] {
			if g2[k][i] != g[k][i] {
				t.Fatalf("gradient of %s[%d] = %v with NaN/Inf padding, %v without", v.Name, i, g2[k][i], g[k][i])
			}
		}
	}
}

// TestScoresAreTheTrainingScores checks that evaluation ranks with the scores training optimises:
// the InfoNCE loss recomputed on the host (float64) from Model.Scores equals ForwardBackward's
// loss, for a fixed and a learned temperature.
func TestScoresAreTheTrainingScores(t *testing.T) {
	for _, learn := range []bool{false, true} {
		cfg := testConfig()
		cfg.LearnTemperature = learn
		m, err := New(testBackend(t), cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		b, tg := SyntheticBatch(cfg, 3, 5, 9)
		s, err := m.Scores(b, tg.Candidates)
		if err != nil {
			t.Fatal(err)
		}
		C := len(tg.Candidates) / cfg.CandidateDim
		if len(s) != b.B*C {
			t.Fatalf("learn %v: %d scores, want %d x %d", learn, len(s), b.B, C)
		}
		lse := func(row []float32, keep func(c int) bool) float64 {
			hi := math.Inf(-1)
			for c, v := range row {
				if keep(c) {
					hi = math.Max(hi, float64(v))
				}
			}
			sum := 0.0
			for c, v := range row {
				if keep(c) {
					sum += math.Exp(float64(v) - hi)
				}
			}
			return hi + math.Log(sum)
		}
		want := 0.0
		for i := range b.B {
			row := s[i*C : (i+1)*C]
			want += lse(row, func(int) bool { return true }) - lse(row, func(c int) bool { return slices.Contains(tg.Positives[i], c) })
		}
		want /= float64(b.B)
		got, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(got)-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Errorf("learn %v: ForwardBackward loss %.7f, InfoNCE of Model.Scores %.7f", learn, got, want)
		}
	}
}
