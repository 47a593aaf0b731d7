// Package train is the training loop of a learned attack: batches from the prefetching sampler
// pipeline, a task's forward and backward (package tasks holds the tasks), AdamW with warmup and
// cosine decay, periodic evaluation on train and val (tasks.Evaluate), metrics.jsonl, atomic
// checkpoints and exact resume.
package train

import "math"

// Schedule is linear warmup from 0 to the peak rate over Warmup steps, then cosine decay to
// MinFrac*peak at step Total. Steps are 1-based, as the engine's AdamW counts them.
type Schedule struct {
	Peak    float64
	Warmup  int
	Total   int
	MinFrac float64
}

// At is the learning rate of 1-based step s.
func (s Schedule) At(step int) float64 {
	if step <= 0 {
		return 0
	}
	if s.Warmup > 0 && step <= s.Warmup {
		return s.Peak * float64(step) / float64(s.Warmup)
	}
	decay := s.Total - s.Warmup
	if decay <= 0 {
		return s.Peak
	}
	p := math.Min(1, float64(step-s.Warmup)/float64(decay))
	lo := s.Peak * s.MinFrac
	return lo + (s.Peak-lo)*0.5*(1+math.Cos(math.Pi*p))
}
