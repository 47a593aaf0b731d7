package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// mixCUDAShapes are odd (B, n, k, d) as the sampler's padded batches have them (n, k, d no
// multiple of 4, 8 or 32; B 1 and 3; k above and below n), and one of the paper's n.
var mixCUDAShapes = [][4]int{{1, 1, 1, 1}, {1, 7, 5, 13}, {3, 5, 9, 33}, {3, 19, 17, 65}, {1, 37, 41, 101}, {3, 129, 131, 257}, {4, 256, 256, 1024}}

// mixOn forms U = A X on be through the tape. a: (B, n, k), x: (B, k, d) -> (B, n, d).
func mixOn(t *testing.T, be engine.Backend, a, x []float32, s [4]int, round engine.MixRound) []float32 {
	t.Helper()
	B, n, k, d := s[0], s[1], s[2], s[3]
	tp := engine.NewTape(be)
	u := tp.MixRows(tp.Input(a, B, n, k), tp.Input(x, B, k, d), round)
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	out := u.ToHost()
	if err := engine.Sync(be); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMixRowsCUDA checks device-side mixing (engine.Tape.MixRows through cuBLAS) against the
// host's BLAS (the CPU backend, the GEMM the sampler forms U with) at every backend precision:
// U must be fp32 in tf32 and bf16 runs too. Random operands: each element within twice
// gamma_k of its products' magnitudes (two fp32 sums in unknown orders); small integers: bit for
// bit (every order is exact); bf16 and fp16 rounding: values of the format, within the fp32
// bound plus one unit of the format. It logs whether mix.cu's rounding kernel was loaded.
func TestMixRowsCUDA(t *testing.T) {
	ref := newCPU(t, cpu.Config{Workers: 2})
	defer ref.Close()
	for _, prec := range []string{PrecisionFP32, PrecisionTF32, PrecisionBF16} {
		t.Run(prec, func(t *testing.T) {
			be := newTestBackend(t, prec)
			t.Logf("rounding kernel %s loaded: %v", roundObserveKernel, be.RoundsObserveOnDevice())
			r := rand.New(rand.NewPCG(41, 11))
			for _, s := range mixCUDAShapes {
				B, n, k, d := s[0], s[1], s[2], s[3]
				a, x := make([]float32, B*n*k), make([]float32, B*k*d)
				for i := range a {
					a[i] = float32(r.IntN(17) - 8)
				}
				for i := range x {
					x[i] = float32(r.IntN(33) - 16)
				}
				got, want := mixOn(t, be, a, x, s, engine.MixRoundNone), mixOn(t, ref, a, x, s, engine.MixRoundNone)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v integers: U[%d] = %g on the GPU, %g on the host: every order is exact here", s, i, got[i], want[i])
					}
				}
				for i := range a {
					a[i] = float32(r.NormFloat64())
				}
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				mag := mixMagnitudes(a, x, s)
				for _, round := range []engine.MixRound{engine.MixRoundNone, engine.MixRoundBF16, engine.MixRoundFP16} {
					got, want := mixOn(t, be, a, x, s, round), mixOn(t, ref, a, x, s, round)
					unit := map[engine.MixRound]float64{engine.MixRoundNone: 0, engine.MixRoundBF16: 0x1p-7, engine.MixRoundFP16: 0x1p-10}[round]
					worst := 0.0
					for i := range want {
						sumErr := 2 * fptol.Gamma(k, fptol.Float32) * mag[i]
						tol := sumErr + unit*(math.Abs(float64(want[i]))+sumErr) + 0x1p-24
						if round == engine.MixRoundNone {
							tol = sumErr
						}
						diff := math.Abs(float64(got[i]) - float64(want[i]))
						if !(diff <= tol) {
							t.Fatalf("%v round %v: U[%d] = %g on the GPU, %g on the host: off by %g > %g", s, round, i, got[i], want[i], diff, tol)
						}
						if tol > 0 {
							worst = max(worst, diff/tol)
						}
					}
					t.Logf("%v round %v: worst %.3g of the bound", s, round, worst)
				}
			}
		})
	}
}

// mixMagnitudes is, per element of U = A X, the sum of the magnitudes of its products.
func mixMagnitudes(a, x []float32, s [4]int) []float64 {
	B, n, k, d := s[0], s[1], s[2], s[3]
	mag := make([]float64, B*n*d)
	for b := range B {
		for i := range n {
			row := mag[(b*n+i)*d : (b*n+i+1)*d]
			for j := range k {
				av := math.Abs(float64(a[(b*n+i)*k+j]))
				for l, xv := range x[(b*k+j)*d : (b*k+j+1)*d] {
					row[l] += av * math.Abs(float64(xv))
				}
			}
		}
	}
	return mag
}
