package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

func testConfig() Config {
	return Config{Architecture: "LlamaForCausalLM", VocabSize: 97, Hidden: 48, Intermediate: 80, Layers: 2,
		Heads: 6, KVHeads: 2, HeadDim: 8, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
}

func randomModel(t *testing.T, c Config, seed uint64) *Model {
	t.Helper()
	m, err := Random(c, seed, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// storage is m's float32 storage of one weight.
func storage(t *testing.T, m *Model, p Part, blk int) []float32 {
	t.Helper()
	x, err := m.Storage(p, blk)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func maxRel(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / den
}

func ids(seed uint64, vocab, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

// Llama 3.1's scaling keeps high frequencies, divides low ones by the factor and interpolates the
// band between, checked against the rule's values for a small head.
func TestLlama3RopeScaling(t *testing.T) {
	c := testConfig()
	c.HeadDim, c.RopeTheta = 8, 10000
	c.Rope = RopeScaling{Kind: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 64}
	got := c.InvFreq()
	// Base frequencies 1, 0.1, 0.01, 0.001 have wavelengths 6.28, 62.8, 628, 6283; the band is
	// [64/4, 64/1] = [16, 64]: the first is kept, the last two divided by 8, the second smoothed.
	s := (64/(2*math.Pi/0.1) - 1) / (4 - 1)
	want := []float64{1, (1-s)*0.1/8 + s*0.1, 0.01 / 8, 0.001 / 8}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12*want[i] {
			t.Fatalf("inv freq %d: got %g, want %g", i, got[i], want[i])
		}
	}
}

// A config the decoder cannot run is refused with the key named.
func TestNewRefusesBadConfig(t *testing.T) {
	bad := testConfig()
	bad.Heads = 5
	if _, err := New(bad, nil); err == nil {
		t.Error("heads not a multiple of kv heads: no error")
	}
	bad = testConfig()
	bad.Rope.Kind = "yarn"
	if _, err := New(bad, nil); err == nil {
		t.Error("yarn rope scaling: no error")
	}
}

// Random is a function of its seed.
func TestRandomDeterministic(t *testing.T) {
	a, b := randomModel(t, testConfig(), 3), randomModel(t, testConfig(), 3)
	c := randomModel(t, testConfig(), 4)
	if maxRel(storage(t, a, DownProj, 1), storage(t, b, DownProj, 1)) != 0 || maxRel(storage(t, a, LMHead, -1), storage(t, b, LMHead, -1)) != 0 {
		t.Fatal("same seed, different weights")
	}
	if maxRel(storage(t, a, DownProj, 1), storage(t, c, DownProj, 1)) == 0 {
		t.Fatal("different seeds, same weights")
	}
}
