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
