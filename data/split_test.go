package data

import (
	"math"
	"testing"
)

func TestSplitOfKnownAnswersAndFraction(t *testing.T) {
	// Pinned values: changing the hash silently moves texts between train and val, which would
	// make old runs incomparable with new ones.
	for id, want := range map[int64]uint64{0: 0xe220a8397b1dcdaf, 1: 0x910a2dec89025cc1} {
		if got := splitmix64(uint64(id)); got != want {
			t.Fatalf("splitmix64(%d) = %#x, want %#x", id, got, want)
		}
	}
	const n = 200000
	val := 0
	for id := int64(0); id < n; id++ {
		if SplitOf(id, 0.1) == Val {
			val++
		}
	}
	if f := float64(val) / n; math.Abs(f-0.1) > 0.005 {
		t.Fatalf("val fraction %.4f, want 0.1", f)
	}
	if SplitOf(42, 0) != Train || SplitOf(42, 1) != Val {
		t.Fatal("valFrac 0 must give all train and 1 all val")
	}
}

func TestMemCorpusRowsAndErrors(t *testing.T) {
	m := NewMemCorpus(2, 1)
	if err := m.Add(7, []float32{1, 2, 3, 4}, []float32{9}); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(8, []float32{5, 6}, []float32{10}); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(8, []float32{5, 6}, []float32{10}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if err := m.Add(9, []float32{5}, []float32{10}); err == nil {
		t.Fatal("ragged row accepted")
	}
	dst := make([]float32, 2)
	if err := m.Rows(0, 1, 1, dst); err != nil || dst[0] != 3 || dst[1] != 4 {
		t.Fatalf("Rows(0,1,1) = %v, %v", dst, err)
	}
	if err := m.Rows(1, 0, 2, make([]float32, 4)); err == nil {
		t.Fatal("out-of-range rows accepted")
	}
	if m.NumTokens(0) != 2 || m.NumTokens(1) != 1 || m.TextID(1) != 8 {
		t.Fatal("wrong counts or ids")
	}
}
