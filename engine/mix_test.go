package engine_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// mixShapes are odd (B, n, k, d): n, k, d no multiple of 4, 8 or 32, B 1 and 3, and k < n,
// k > n (fewer observed rows than rows of X), as the sampler's batches have.
var mixShapes = [][4]int{{1, 1, 1, 1}, {1, 7, 5, 13}, {3, 5, 9, 33}, {3, 19, 17, 65}, {1, 37, 41, 101}}

// mixRef is U = A X in float64 and, per element, the sum of the products' magnitudes (the scale
// of an fp32 sum's error). a: (B, n, k), x: (B, k, d) -> (B, n, d).
func mixRef(a, x []float32, B, n, k, d int) (u, mag []float64) {
	u, mag = make([]float64, B*n*d), make([]float64, B*n*d)
	for b := range B {
		for i := range n {
			for j := range k {
				av := float64(a[(b*n+i)*k+j])
				for l := range d {
					p := av * float64(x[(b*k+j)*d+l])
					u[(b*n+i)*d+l] += p
					mag[(b*n+i)*d+l] += math.Abs(p)
				}
			}
		}
	}
	return u, mag
}

func mixOnCPU(t *testing.T, a, x []float32, B, n, k, d int, round engine.MixRound) []float32 {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	tp := engine.NewTape(be)
	u := tp.MixRows(tp.Input(a, B, n, k), tp.Input(x, B, k, d), round)
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	if got := u.Shape(); len(got) != 3 || got[0] != B || got[1] != n || got[2] != d {
		t.Fatalf("U shape %v, want (%d, %d, %d)", got, B, n, d)
	}
	return u.ToHost()
}

// TestMixRowsMatchesReference checks U = A X on the CPU backend against float64 on odd shapes:
// each element within gamma_k of its products' magnitudes (any fp32 summation order), and,
// rounded to bf16 or fp16, within half an ulp of the format beyond that.
func TestMixRowsMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 2))
	for _, s := range mixShapes {
		B, n, k, d := s[0], s[1], s[2], s[3]
		a, x := randHost(r, B*n*k), randHost(r, B*k*d)
		want, mag := mixRef(a, x, B, n, k, d)
		for _, round := range []engine.MixRound{engine.MixRoundNone, engine.MixRoundBF16, engine.MixRoundFP16} {
			got := mixOnCPU(t, a, x, B, n, k, d, round)
			unit := map[engine.MixRound]float64{engine.MixRoundNone: 0, engine.MixRoundBF16: 0x1p-8, engine.MixRoundFP16: 0x1p-11}[round]
			for i, w := range want {
				sumErr := fptol.Gamma(k, fptol.Float32) * mag[i]
				tol := sumErr + unit*(math.Abs(w)+sumErr)
				if round == engine.MixRoundFP16 {
					tol += 0x1p-25 // half the spacing of fp16's subnormals
				}
				if math.Abs(float64(got[i])-w) > tol {
					t.Fatalf("%v round %v: U[%d] = %g, float64 %g: off by %g > %g", s, round, i, got[i], w, math.Abs(float64(got[i])-w), tol)
				}
			}
			switch round {
			case engine.MixRoundBF16:
				for i, v := range got {
					if numfmt.RoundBF16(v) != v {
						t.Fatalf("%v: U[%d] = %g is not a bf16 value", s, i, v)
					}
				}
			case engine.MixRoundFP16:
				for i, v := range got {
					if numfmt.RoundF16(v) != v {
						t.Fatalf("%v: U[%d] = %g is not an fp16 value", s, i, v)
					}
				}
			}
		}
	}
}

// TestMixRowsExactIsBitEqual: with small integers every product and partial sum is exact in
// fp32, so every summation order gives the float64 result bit for bit (the fixed-order reference
// any backend must meet exactly).
func TestMixRowsExactIsBitEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 3))
	for _, s := range mixShapes {
		B, n, k, d := s[0], s[1], s[2], s[3]
		a, x := make([]float32, B*n*k), make([]float32, B*k*d)
		for i := range a {
			a[i] = float32(r.IntN(17) - 8)
		}
		for i := range x {
			x[i] = float32(r.IntN(33) - 16)
		}
		want, _ := mixRef(a, x, B, n, k, d)
		got := mixOnCPU(t, a, x, B, n, k, d, engine.MixRoundNone)
		for i, w := range want {
			if got[i] != float32(w) {
				t.Fatalf("%v: U[%d] = %g, exact %g", s, i, got[i], w)
			}
		}
	}
}

// TestMixRowsRefusals: MixRows is forward-only and checks its shapes.
func TestMixRowsRefusals(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range []struct {
		name string
		run  func(tp *engine.Tape)
		want string
	}{
		{"gradient", func(tp *engine.Tape) {
			tp.MixRows(tp.Variable(make([]float32, 6), 1, 2, 3), tp.Input(make([]float32, 6), 1, 3, 2), engine.MixRoundNone)
		}, "needs a gradient"},
		{"inner sizes", func(tp *engine.Tape) {
			tp.MixRows(tp.Input(make([]float32, 6), 1, 2, 3), tp.Input(make([]float32, 4), 1, 2, 2), engine.MixRoundNone)
		}, "want (B, n, k) and (B, k, d)"},
		{"batch", func(tp *engine.Tape) {
			tp.MixRows(tp.Input(make([]float32, 6), 1, 2, 3), tp.Input(make([]float32, 12), 2, 3, 2), engine.MixRoundNone)
		}, "want (B, n, k) and (B, k, d)"},
		{"rounding", func(tp *engine.Tape) {
			tp.MixRows(tp.Input(make([]float32, 6), 1, 2, 3), tp.Input(make([]float32, 6), 1, 3, 2), engine.MixRound(7))
		}, "want fp32, bf16 or fp16"},
	} {
		tp := engine.NewTape(be)
		c.run(tp)
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestMixRowsIsData: U needs no gradient, so a loss of U alone has nothing to differentiate, and
// a loss that mixes U with a variable sends the variable its gradient and U none.
func TestMixRowsIsData(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	tp := engine.NewTape(be)
	a := []float32{1, 2, 3, 4} // (1, 2, 2)
	x := []float32{1, 0, 0, 1} // identity
	u := tp.MixRows(tp.Input(a, 1, 2, 2), tp.Input(x, 1, 2, 2), engine.MixRoundNone)
	w := tp.Variable([]float32{1, 1, 1, 1}, 1, 2, 2)
	loss := tp.Sum(tp.Mul(u, w))
	if err := tp.Backward(loss); err != nil {
		t.Fatal(err)
	}
	if got := w.Grad().ToHost(); got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Errorf("d loss / d w = %v, want U = A = [1 2 3 4]", got)
	}
	if u.Grad() != nil {
		t.Errorf("U received a gradient")
	}
}
