package train

import "github.com/gelo-research/geloattack/engine"

// stepRecorder is a backend that can run a training step's device work as one unit: the CUDA
// backend under GELOATTACK_CUDA_GRAPHS=1 records the step between BeginStep and EndStep and
// replays it as a CUDA graph once the same step has been seen (engine/cuda/graph.go); without
// graphs both calls do nothing.
type stepRecorder interface {
	BeginStep()
	EndStep()
}

// recordedStep runs one step's forward and backward (the job's step function) inside be's
// BeginStep and EndStep when be has them. Clipping, the optimizer and everything after stay
// outside: their scalars change every step.
func recordedStep(be engine.Backend, stepFn func(int64) (float64, int64, error), step int64) (float64, int64, error) {
	r, ok := be.(stepRecorder)
	if !ok {
		return stepFn(step)
	}
	r.BeginStep()
	defer r.EndStep()
	return stepFn(step)
}
