package engine

import "fmt"

// An op whose work is more than GEMMs, copies, elementwise maps and
// reductions runs a backend's fused kernel. The op's file declares the
// kernel's name and its typed form (a struct of functions, e.g.
// InfoNCEKernels under KernelInfoNCE); every backend registers a value of
// that type under that name, and Backend.Kernel hands it back. So a new op is
// one file here plus its kernels in each backend, and the Backend interface
// does not grow.

// KernelOf returns the kernel be registers under name, as the type K the op
// declares for it; an error names both when be has none of that type.
func KernelOf[K any](be Backend, name string) (K, error) {
	k, ok := be.Kernel(name).(K)
	if !ok {
		return k, fmt.Errorf("engine: backend %q has no kernel %q of type %T", be.Name(), name, k)
	}
	return k, nil
}

// kernel is KernelOf on the tape's backend, recording a missing kernel as
// the tape's error (ok false).
func kernel[K any](tp *Tape, name string) (k K, ok bool) {
	k, err := KernelOf[K](tp.be, name)
	if err != nil {
		tp.fail(err)
		return k, false
	}
	return k, true
}
