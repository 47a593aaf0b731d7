package stepbench

import (
	"errors"
	"testing"
)

// fakeRecorder logs the order of its brackets and of the work run between them.
type fakeRecorder struct{ log []string }

func (f *fakeRecorder) BeginStep() { f.log = append(f.log, "begin") }
func (f *fakeRecorder) EndStep()   { f.log = append(f.log, "end") }

// TestRecordedBracketsTheStep: a backend that records steps (CUDA graphs) gets the forward and
// backward between one BeginStep and one EndStep, also when they fail (a recording left open
// would swallow the next step's calls); a backend without the pair just runs the work.
func TestRecordedBracketsTheStep(t *testing.T) {
	for _, fail := range []bool{false, true} {
		r := &fakeRecorder{}
		boom := errors.New("boom")
		err := recorded(r, func() error {
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
	if err := recorded(struct{}{}, func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("a backend without BeginStep: ran %v, error %v", ran, err)
	}
}
