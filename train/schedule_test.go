package train

import (
	"math"
	"testing"
)

func TestScheduleKnownPoints(t *testing.T) {
	s := Schedule{Peak: 1e-3, Warmup: 10, Total: 110, MinFrac: 0.1}
	cases := []struct {
		step int
		want float64
	}{
		{0, 0},
		{1, 1e-4},
		{5, 5e-4},
		{10, 1e-3},
		{60, 1e-4 + 0.9e-3*0.5}, // halfway through the cosine
		{110, 1e-4},             // floor
		{500, 1e-4},             // stays at the floor
	}
	for _, c := range cases {
		if got := s.At(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("At(%d) = %g, want %g", c.step, got, c.want)
		}
	}
	// Monotone non-increasing after warmup.
	prev := s.At(10)
	for step := 11; step <= 110; step++ {
		if cur := s.At(step); cur > prev+1e-15 {
			t.Fatalf("rate rises at step %d: %g > %g", step, cur, prev)
		}
		prev = s.At(step)
	}
}
