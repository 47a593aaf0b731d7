package train

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks"
)

// TestMemoryStopsGrowingOnceEveryBucketIsSeen trains 320 steps of a ranged config (1-8 positives
// x 3-12 tokens, shield fraction 0-0.5), whose set size changes almost every step, through the
// pipeline with the default bucket of 32. Once each bucket has appeared, neither the activation
// arena nor the gradient pool may grow by a byte.
func TestMemoryStopsGrowingOnceEveryBucketIsSeen(t *testing.T) {
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	checkMemoryStopsGrowing(t, be, nil)
}

// checkMemoryStopsGrowing is the test above on backend be; deviceBytes, when not nil, is the
// device memory the backend holds, which must stop growing too.
func checkMemoryStopsGrowing(t *testing.T, be engine.Backend, deviceBytes func() int64) {
	t.Helper()
	const d, e, steps = 16, 8, 320
	rng := rand.New(rand.NewPCG(11, 12))
	c := data.NewMemCorpus(d, e)
	for i := 0; i < 200; i++ {
		rows := make([]float32, (3+rng.IntN(12))*d)
		for j := range rows {
			rows[j] = float32(rng.NormFloat64())
		}
		emb := make([]float32, e)
		for j := range emb {
			emb[j] = float32(rng.NormFloat64())
		}
		if err := c.Add(int64(i), rows, emb); err != nil {
			t.Fatal(err)
		}
	}
	scfg := gelo.DefaultConfig()
	scfg.Seed, scfg.ValFrac = 5, 0.2
	scfg.Positives, scfg.TokensPerText = gelo.Uniform(1, 8), gelo.Uniform(3, 12)
	scfg.ShieldFrac = gelo.Uniform(0, 0.5)
	s, err := gelo.NewSampler(c, scfg)
	if err != nil {
		t.Fatal(err)
	}
	bucket := DefaultOptions().Bucket(scfg)
	if bucket != 32 {
		t.Fatalf("default bucket of a ranged config: %d, want 32", bucket)
	}
	m, err := settransformer.New(be, settransformer.Config{InputDim: d, CandidateDim: e, Hidden: 64, Layers: 1,
		Heads: 4, MLPHidden: 256, Eps: settransformer.DefaultEps, Task: settransformer.TaskRetrieval,
		Temperature: settransformer.DefaultTemperature}, 1)
	if err != nil {
		t.Fatal(err)
	}
	task := tasks.NewRetrieval(m, s, 0, 1)
	pipe := gelo.NewPipeline(context.Background(), s, data.Train, 4, 2, 2, 0, gelo.PadTo(bucket))
	defer pipe.Close()

	raw, padded := map[int]bool{}, map[int]bool{}
	changed, prev := 0, -1 // steps whose set size differs from the step before
	var lastNew int        // the step at which a bucket was first seen last
	held := make([]int64, steps)
	pool := make([]int64, steps)
	dev := make([]int64, steps)
	for step := 0; step < steps; step++ {
		b, err := pipe.Next()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ex := range b.Examples {
			n = max(n, ex.NObs)
		}
		raw[n] = true
		if n != prev {
			changed++
		}
		prev = n
		if b.N != gelo.PadN(n, bucket) || b.N%bucket != 0 {
			t.Fatalf("step %d: largest example has %d rows, batch N = %d, want %d", step, n, b.N, gelo.PadN(n, bucket))
		}
		if !padded[b.N] {
			padded[b.N], lastNew = true, step
		}
		if _, err := task.Step(b, int64(step)); err != nil {
			t.Fatalf("step %d (N=%d): %v", step, b.N, err)
		}
		m.Params().ZeroGrad()
		held[step], _ = m.Tape().ArenaBytes()
		pool[step] = m.Tape().GradPoolBytes()
		if deviceBytes != nil {
			dev[step] = deviceBytes()
		}
	}
	t.Logf("%d distinct set sizes in %d buckets %v; last new bucket at step %d; arena %d bytes, pool %d bytes, device %d bytes",
		len(raw), len(padded), padded, lastNew, held[steps-1], pool[steps-1], dev[steps-1])
	t.Logf("the set size changed from the step before in %d of %d steps", changed, steps)
	if changed < steps*9/10 || len(raw) < 40 || len(padded) < 2 {
		t.Fatalf("the config drew %d distinct set sizes in %d buckets, changing in %d of %d steps: too few to test anything",
			len(raw), len(padded), changed, steps)
	}
	if lastNew > steps/2 {
		t.Fatalf("a new bucket appeared at step %d: too late to see memory stay flat", lastNew)
	}
	for step := lastNew + 1; step < steps; step++ {
		if held[step] != held[lastNew] || pool[step] != pool[lastNew] {
			t.Fatalf("step %d: arena %d -> %d bytes, gradient pool %d -> %d bytes after every bucket was seen at step %d",
				step, held[lastNew], held[step], pool[lastNew], pool[step], lastNew)
		}
		if dev[step] != dev[lastNew] {
			t.Fatalf("step %d: device memory %d -> %d bytes after every bucket was seen at step %d",
				step, dev[lastNew], dev[step], lastNew)
		}
	}
}
