package engine_test

import (
	"errors"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// fakeRecorder is a CPU backend that logs the order of its brackets and of the work run between them.
type fakeRecorder struct {
	engine.Backend
	log []string
}

func (f *fakeRecorder) BeginStep() { f.log = append(f.log, "begin") }
func (f *fakeRecorder) EndStep()   { f.log = append(f.log, "end") }

// TestRecordStepBracketsTheStep: a backend that records steps (CUDA graphs) gets the forward and
// backward between one BeginStep and one EndStep, also when they fail (a recording left open
// would swallow the next step's calls); a backend without the pair just runs the work.
func TestRecordStepBracketsTheStep(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, fail := range []bool{false, true} {
		r := &fakeRecorder{Backend: be}
		boom := errors.New("boom")
		err := engine.RecordStep(r, func() error {
			r.log = append(r.log, "work")
			if fail {
				return boom
			}
			return nil
		})
		if got := len(r.log); got != 3 || r.log[0] != "begin" || r.log[1] != "work" || r.log[2] != "end" {
			t.Errorf("fail %v: calls %v, want [begin work end]", fail, r.log)
		}
		if fail != errors.Is(err, boom) {
			t.Errorf("fail %v: error %v", fail, err)
		}
	}
	ran := false
	if err := engine.RecordStep(be, func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("a backend without BeginStep: ran %v, error %v", ran, err)
	}
}
