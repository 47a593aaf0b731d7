package engine

import "fmt"

// HostMemory is implemented by a backend whose memory is the host's (the CPU backend): it can
// view a host slice as its storage without copying, and hand out a tensor's elements. A decoder
// uses it to compute from a checkpoint's float32 weights where they lie, and to convert stored
// bf16 weights straight into the memory a GEMM reads.
type HostMemory interface {
	// Adopt views data as storage of the backend. The caller keeps data alive, and unchanged
	// while ops read it, for as long as tensors use it.
	Adopt(data []float32) Storage
	// HostSlice is t's elements, read and written in place.
	HostSlice(t *Tensor) []float32
}

// ViewHost is a tensor of the given shape over data (len(data) elements exactly) on a backend
// whose memory is the host's; it needs no gradient and no tape resets it. It fails on any other
// backend (the caller uploads instead).
func ViewHost(be Backend, name string, data []float32, shape ...int) (*Tensor, error) {
	hm, ok := be.(HostMemory)
	if !ok {
		return nil, fmt.Errorf("engine: view %s: backend %s does not compute in host memory", name, be.Name())
	}
	t, err := shapedLeaf(name, shape)
	if err != nil {
		return nil, err
	}
	if t.size != len(data) {
		return nil, fmt.Errorf("engine: view %s: %d values for shape %v", name, len(data), shape)
	}
	t.st = hm.Adopt(data)
	return t, nil
}

// HostSlice is t's elements in place when its backend computes in host memory (ok false
// otherwise: copy with CopyTo/CopyFrom instead).
func HostSlice(t *Tensor) (x []float32, ok bool) {
	if t == nil || t.st == nil {
		return nil, false
	}
	hm, ok := t.st.Backend().(HostMemory)
	if !ok {
		return nil, false
	}
	return hm.HostSlice(t), true
}

// shapedLeaf is a tensor of shape with no storage yet, outside any tape.
func shapedLeaf(name string, shape []int) (*Tensor, error) {
	if len(shape) < 1 || len(shape) > maxDims {
		return nil, fmt.Errorf("engine: %s: shape %v: want 1 to %d dimensions", name, shape, maxDims)
	}
	t := &Tensor{ndim: len(shape), size: 1, name: name, node: -1}
	for i, s := range shape {
		if s < 1 {
			return nil, fmt.Errorf("engine: %s: shape %v: dimension %d is %d", name, shape, i, s)
		}
		t.shape[i] = s
		t.size *= s
	}
	return t, nil
}
