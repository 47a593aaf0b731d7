package losses

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestInfoNCEHostKnownAnswers(t *testing.T) {
	// Equal scores: L = log(|C| / |P|).
	loss, _, err := InfoNCEHost(make([]float64, 2*5), 5, [][]int{{0}, {1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (math.Log(5) + math.Log(5.0/2)) / 2; math.Abs(loss-want) > 1e-12 {
		t.Errorf("equal scores: loss %v, want %v", loss, want)
	}
	// Every candidate positive: L = 0 whatever the scores, even huge ones (max shift).
	loss, _, err = InfoNCEHost([]float64{1000, -3, 2000}, 3, [][]int{{0, 1, 2}})
	if err != nil || math.Abs(loss) > 1e-12 {
		t.Errorf("all positive: loss %v err %v, want 0", loss, err)
	}
	if _, _, err := InfoNCEHost([]float64{0, 0}, 2, [][]int{{2}}); err == nil {
		t.Error("a positive index out of range was accepted")
	}
}

func TestInfoNCEHostGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const B, C = 3, 6
	pos := [][]int{{0, 4}, {2}, {1, 3, 5}}
	s := make([]float64, B*C)
	for i := range s {
		s[i] = 5 * rng.NormFloat64()
	}
	_, grad, err := InfoNCEHost(s, C, pos)
	if err != nil {
		t.Fatal(err)
	}
	const h = 1e-6
	for i := range s {
		orig := s[i]
		s[i] = orig + h
		lp, _, _ := InfoNCEHost(s, C, pos)
		s[i] = orig - h
		lm, _, _ := InfoNCEHost(s, C, pos)
		s[i] = orig
		if fd := (lp - lm) / (2 * h); math.Abs(fd-grad[i]) > 1e-7 {
			t.Errorf("grad[%d] = %v, finite difference %v", i, grad[i], fd)
		}
	}
}
