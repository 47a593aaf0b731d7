package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
)

// TestWeightCopiesCUDA checks the bf16 weight copies AdamW keeps (weights16.go) on a GPU: after an
// optimizer step a bf16 Linear reads the copy (one rounding launch fewer) and gives bit for bit
// what it gives with the copies dropped (the weights rounded again); a weight written outside the
// optimizer (a checkpoint's restore) is never read from a stale copy; fp32 and tf32 backends keep
// none. It logs whether adamw16.ptx was loaded (without it there are no copies, and the test
// checks only that the results are unchanged).
func TestWeightCopiesCUDA(t *testing.T) {
	for _, prec := range []string{PrecisionFP32, PrecisionTF32, PrecisionBF16} {
		t.Run(prec, func(t *testing.T) {
			be := newTestBackend(t, prec)
			_, loaded := be.dev.funcs[adamwBF16Kernel]
			t.Logf("%s loaded: %v", adamwBF16Kernel, loaded)
			r := rand.New(rand.NewPCG(41, 17))
			const rows, in, out = 37, 96, 130
			ps := engine.NewParams()
			w := ps.Add("w", []int{out, in}, true)
			bias := ps.Add("b", []int{out}, false)
			w2 := ps.Add("w2", []int{in, out}, true)
			if err := ps.Alloc(be); err != nil {
				t.Fatal(err)
			}
			randn := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.NormFloat64())
				}
				return v
			}
			for _, p := range []*engine.Tensor{w, bias, w2} {
				if err := p.CopyFrom(randn(p.Size())); err != nil {
					t.Fatal(err)
				}
			}
			opt, err := engine.NewAdamW(ps, engine.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Grad().CopyFrom(randn(ps.Len())); err != nil {
				t.Fatal(err)
			}
			opt.Step()
			x := randn(rows * in)
			linear := func() ([]float32, int64) {
				tp := engine.NewTape(be)
				c0 := be.Calls()
				y := tp.Linear(tp.Linear(tp.Input(x, rows, in), w), w2) // (rows, out) -> (rows, in)
				calls := be.Calls() - c0
				if err := tp.Err(); err != nil {
					t.Fatal(err)
				}
				v := y.ToHost()
				if err := engine.Sync(be); err != nil {
					t.Fatal(err)
				}
				return v, calls
			}
			withCopy, callsWith := linear()
			want := loaded && prec == PrecisionBF16 && !weightCopiesOff()
			if got := len(be.copies) > 0; got != want {
				t.Fatalf("weight copies kept: %v, want %v", got, want)
			}
			be.dropWeightCopies()
			without, callsWithout := linear()
			if !bitsEqual(withCopy, without) {
				t.Fatalf("Linear with the weight copies differs from Linear rounding the weights again")
			}
			if want && callsWithout-callsWith != 2 {
				t.Errorf("launches: %d with the copies, %d without; want two roundings fewer", callsWith, callsWithout)
			}
			t.Logf("%d launches and cuBLAS calls with the copies, %d without", callsWith, callsWithout)

			// A fresh step refreshes the copies; then a restore writes w outside the optimizer.
			if err := ps.Grad().CopyFrom(randn(ps.Len())); err != nil {
				t.Fatal(err)
			}
			opt.Step()
			if err := w.CopyFrom(randn(w.Size())); err != nil {
				t.Fatal(err)
			}
			restored, _ := linear()
			be.dropWeightCopies()
			if again, _ := linear(); !bitsEqual(restored, again) {
				t.Fatalf("after a restore of w, Linear read a stale copy")
			}
		})
	}
}

// bitsEqual reports whether a and b hold the same float32 bits.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
