package engine

// StepRecorder is a backend that can run a training step's device work as one unit: the CUDA
// backend under GELOATTACK_CUDA_GRAPHS=1 records the calls between BeginStep and EndStep and
// replays them as a CUDA graph once the same step has been seen (engine/cuda/graph.go); without
// graphs both calls do nothing.
type StepRecorder interface {
	BeginStep()
	EndStep()
}

// RecordStep runs a step's forward and backward inside be's BeginStep and EndStep when be is a
// StepRecorder (EndStep also when fwdBwd fails: a recording left open would take the next
// step's calls), and just runs it otherwise. Clipping, the optimizer and everything after stay
// outside: their scalars change every step. The training loop and the step benchmark both
// bracket their steps here, so the benchmark times what training runs.
func RecordStep(be Backend, fwdBwd func() error) error {
	r, ok := be.(StepRecorder)
	if !ok {
		return fwdBwd()
	}
	r.BeginStep()
	defer r.EndStep()
	return fwdBwd()
}
