package eval

import (
	"math"
	"testing"
)

// Known answers (R's binom.test, the same exact interval), the edges, and refused inputs.
func TestClopperPearsonKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 100, 0, 0.03621669},
		{100, 100, 0.96378331, 1},
		{3, 100, 0.006229972, 0.085176053},
		{50, 100, 0.3983211, 0.6016789},
		{1, 1, 0.025, 1},
	} {
		p, err := ClopperPearson(tc.k, tc.n, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(p.Lo-tc.lo) > 1e-6 || math.Abs(p.Hi-tc.hi) > 1e-6 {
			t.Errorf("%d/%d: [%.8f, %.8f], want [%.8f, %.8f]", tc.k, tc.n, p.Lo, p.Hi, tc.lo, tc.hi)
		}
		if !(p.Lo <= p.Rate() && p.Rate() <= p.Hi) {
			t.Errorf("%d/%d: rate %v outside [%v, %v]", tc.k, tc.n, p.Rate(), p.Lo, p.Hi)
		}
	}
	if p, _ := ClopperPearson(0, 100, 0.95); p.String() != "0/100 [0.000, 0.037]" {
		t.Errorf("String %q", p.String())
	}
	for _, bad := range [][2]int{{-1, 10}, {11, 10}, {0, 0}} {
		if _, err := ClopperPearson(bad[0], bad[1], 0.95); err == nil {
			t.Errorf("%d of %d accepted", bad[0], bad[1])
		}
	}
	if _, err := ClopperPearson(1, 10, 1); err == nil {
		t.Error("level 1 accepted")
	}
}
