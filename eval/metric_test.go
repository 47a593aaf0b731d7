package eval

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAccumulatorKnownAnswer(t *testing.T) {
	var a Accumulator
	for _, v := range []float64{1, 2, 3, 4} {
		a.Add(v, 0.5)
	}
	m := a.Metric()
	wantSE := math.Sqrt(5.0/3.0) / 2 // sample sd of 1..4 is sqrt(5/3)
	if m.N != 4 || math.Abs(m.Mean-2.5) > 1e-15 || math.Abs(m.StdErr-wantSE) > 1e-15 || m.Chance != 0.5 {
		t.Fatalf("got %+v, want mean 2.5, stderr %v, chance 0.5, n 4", m, wantSE)
	}
	var one Accumulator
	one.Add(7, 0.1)
	if m := one.Metric(); m.StdErr != 0 || m.Mean != 7 {
		t.Fatalf("single value: %+v", m)
	}
}

func TestAccumulatorMergeEqualsSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all, a, b Accumulator
	for i := 0; i < 101; i++ {
		v, c := rng.NormFloat64()*3+1, rng.Float64()
		all.Add(v, c)
		if i < 37 {
			a.Add(v, c)
		} else {
			b.Add(v, c)
		}
	}
	a.Merge(b)
	x, y := a.Metric(), all.Metric()
	if x.N != y.N || math.Abs(x.Mean-y.Mean) > 1e-12 || math.Abs(x.StdErr-y.StdErr) > 1e-12 || math.Abs(x.Chance-y.Chance) > 1e-12 {
		t.Fatalf("merged %+v, sequential %+v", x, y)
	}
	var empty Accumulator
	empty.Merge(b)
	if empty.Metric() != b.Metric() {
		t.Fatalf("merge into empty: %+v, want %+v", empty.Metric(), b.Metric())
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {1, 5}, {0.5, 3}, {0.95, 4.8}, {0.25, 2}} {
		if got := Percentile(xs, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Percentile(q=%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its input in place")
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestFromFloat32(t *testing.T) {
	data := []float32{1.5, float32(math.Copysign(0, -1)), 3.25e-30, -7}
	m, err := FromFloat32(2, 2, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range data {
		if got := m.At(i/2, i%2); got != float64(v) || math.Signbit(got) != math.Signbit(float64(v)) {
			t.Errorf("entry %d: %v, want %v", i, got, v)
		}
	}
	if _, err := FromFloat32(3, 2, data); err == nil {
		t.Error("wrong length accepted")
	}
}
