package settransformer

import (
	"math/rand/v2"
	"testing"
)

// With a different set size N every step (ranged positives, tokens or shield fractions), the
// activation arena and the activation-gradient pool stay bounded: after 300 steps of 300 distinct
// sizes the pool holds at most twice what one step at the largest size needs (pooled by exact
// size it held every size's buffers: 122 times as much here, 57.8 MB against 0.47 MB), and a second pass over the same
// range in another order allocates nothing more.
func TestMemoryBoundedUnderChangingSetSizes(t *testing.T) {
	cfg := Config{InputDim: 8, CandidateDim: 8, Hidden: 16, Layers: 1, Heads: 2, MLPHidden: 32, Eps: 1e-5,
		Task: TaskRetrieval, Temperature: DefaultTemperature}
	const lo, steps = 8, 300
	step := func(m *Model, n int, seed uint64) {
		t.Helper()
		b, tg := SyntheticBatch(cfg, 2, n, seed)
		if _, err := m.ForwardBackward(b, tg); err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		m.Params().ZeroGrad()
	}
	// What one step at the largest size needs, on a fresh model.
	ref, err := New(testBackend(t), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	step(ref, lo+steps-1, 0)
	refPool := ref.Tape().GradPoolBytes()
	refArena, _ := ref.Tape().ArenaBytes()

	m, err := New(testBackend(t), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for pass := 0; pass < 2; pass++ {
		sizes := rng.Perm(steps)
		pool0 := m.Tape().GradPoolBytes()
		arena0, _ := m.Tape().ArenaBytes()
		for i, s := range sizes {
			step(m, lo+s, uint64(pass*steps+i))
		}
		pool, arena := m.Tape().GradPoolBytes(), func() int64 { h, _ := m.Tape().ArenaBytes(); return h }()
		t.Logf("pass %d: gradient pool %d bytes (one step at N=%d: %d), arena %d (one step: %d)", pass, pool, lo+steps-1, refPool, arena, refArena)
		if pool > 2*refPool {
			t.Errorf("pass %d: gradient pool %d bytes, over twice the %d of one step at the largest size", pass, pool, refPool)
		}
		if arena > 2*refArena {
			t.Errorf("pass %d: arena %d bytes, over twice the %d of one step at the largest size", pass, arena, refArena)
		}
		if pass == 1 && (pool != pool0 || arena != arena0) {
			t.Errorf("second pass over sizes already seen grew the pool %d -> %d, the arena %d -> %d", pool0, pool, arena0, arena)
		}
	}
}
