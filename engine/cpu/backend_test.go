package cpu_test

import (
	"testing"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestCloseTwiceAndUseAfterClose: Close may be called twice; a backend used
// after Close neither hangs nor panics, computes on the caller's goroutine
// and reports the misuse through engine.BackendErr.
func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	be.SetMinWork(1) // the parallel path, which the pool serves until Close
	if err := engine.BackendErr(be); err != nil {
		t.Fatalf("open backend reports %v", err)
	}
	for range 2 {
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []float32)
	go func() {
		tp := engine.NewTape(be)
		x := tp.Input([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
		done <- tp.Scale(x, 2).ToHost()
	}()
	select {
	case got := <-done:
		for i, v := range got {
			if v != float32(2*(i+1)) {
				t.Fatalf("after Close: Scale gave %v", got)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a kernel after Close hangs")
	}
	if err := engine.BackendErr(be); err == nil {
		t.Fatalf("use after Close reported %v", err)
	}
}

// TestNewRejectsNegativeWorkers: a negative worker count is an error, not a
// pool of no goroutines.
func TestNewRejectsNegativeWorkers(t *testing.T) {
	if _, err := cpu.New(cpu.Config{Workers: -1}); err == nil {
		t.Fatal("Workers -1 accepted")
	}
}
