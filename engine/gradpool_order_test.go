package engine

import (
	"slices"
	"testing"
)

// poolBackend allocates storages for gradPool (any other method panics: nil embedded interface).
type poolBackend struct{ Backend }

type poolStorage struct {
	be *poolBackend
	n  int
}

func (s *poolStorage) Backend() Backend { return s.be }
func (s *poolStorage) Len() int         { return s.n }

func (b *poolBackend) Alloc(n int) (Storage, error) { return &poolStorage{be: b, n: n}, nil }

// TestGradPoolCanonicalOrder: a step that returns its buffers in another order than it took them
// (as Backward does) would hand the next identical step other buffers; with the pool put in
// allocation order at each Reset, identical steps get identical buffers, step after step.
func TestGradPoolCanonicalOrder(t *testing.T) {
	p := gradPool{be: &poolBackend{}, free: map[int][]Storage{}, seq: map[Storage]int{}}
	get := func() Storage {
		st, err := p.get(100)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	put := func(st Storage) { p.put(&Tensor{st: st}) }
	// One step: three buffers alive at once, returned out of order, then a fourth request.
	step := func() []Storage {
		a, b, c := get(), get(), get()
		put(b)
		d := get()
		put(a)
		put(d)
		put(c)
		return []Storage{a, b, c, d}
	}
	step() // allocates the three buffers
	p.canonical()
	second := step()
	for i := range 3 {
		p.canonical()
		if got := step(); !slices.Equal(got, second) {
			t.Fatalf("step %d got other buffers than step 2", i+3)
		}
	}
	if len(p.seq) != 3 {
		t.Fatalf("%d buffers allocated, want 3", len(p.seq))
	}
}
