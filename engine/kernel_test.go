package engine_test

import (
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// withoutKernel is a CPU backend that lacks one fused kernel, as a new
// backend might: ops that need it must fail the tape, not crash.
type withoutKernel struct {
	*cpu.Backend
	missing string
}

func (w *withoutKernel) Unwrap() engine.Backend { return w.Backend }

func (w *withoutKernel) Kernel(name string) any {
	if name == w.missing {
		return nil
	}
	return w.Backend.Kernel(name)
}

// TestMissingKernelFailsTheTape: an op whose fused kernel the backend does
// not register records an error naming the kernel; the ops built from
// Backend's primitives still run.
func TestMissingKernelFailsTheTape(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	be := &withoutKernel{Backend: c, missing: engine.KernelInfoNCE}
	tp := engine.NewTape(be)
	scores := tp.Variable([]float32{1, 2, 3, 4}, 2, 2)
	sq := tp.SumSquares(tp.MatMul(scores, scores, false, true)) // GEMMs and a reduction: no fused kernel
	if err := tp.Err(); err != nil {
		t.Fatalf("ops on Backend's primitives failed: %v", err)
	}
	if got := sq.Item(); got != 5*5+11*11+11*11+25*25 { // x x^T = [[5, 11], [11, 25]]
		t.Errorf("SumSquares(x x^T) = %g, want 892", got)
	}
	loss := tp.InfoNCE(scores, tp.PositiveMask(2, 2, [][]int{{0}, {1}}))
	if err := tp.Err(); err == nil || !strings.Contains(err.Error(), `no kernel "infonce"`) {
		t.Fatalf("InfoNCE without its kernel: error %v, want one naming the kernel", err)
	}
	if err := tp.Backward(loss); err == nil {
		t.Error("Backward after the failed op returned no error")
	}
	if _, err := engine.KernelOf[engine.InfoNCEKernels](c, engine.KernelInfoNCE); err != nil {
		t.Errorf("the CPU backend itself: %v", err)
	}
	if _, err := engine.KernelOf[engine.RMSNormKernels](c, engine.KernelInfoNCE); err == nil {
		t.Error("KernelOf accepted a kernel of another type")
	}
}

// TestWrapperInputsNeedNoArena: the tape accepts a wrapper's parameters
// (allocated through the wrapped backend) by following Unwrap, without
// allocating activation memory to find out which backend it wraps.
func TestWrapperInputsNeedNoArena(t *testing.T) {
	c, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	be := &withoutKernel{Backend: c}
	ps := engine.NewParams()
	w := ps.Add("w", []int{2, 3}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	if w.Storage().Backend() != engine.Backend(c) {
		t.Fatal("the wrapper's parameters are not the wrapped backend's memory: the test checks nothing")
	}
	tp := engine.NewTape(be)
	tp.Reshape(w, 3, 2) // a view: the op itself allocates nothing
	if err := tp.Err(); err != nil {
		t.Fatal(err)
	}
	if held, _ := tp.ArenaBytes(); held != 0 {
		t.Errorf("the arena holds %d bytes after an op that allocates nothing", held)
	}
}
