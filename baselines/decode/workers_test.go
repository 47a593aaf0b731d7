package decode

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/models/llama"
)

// decode's results are the same bytes at GOMAXPROCS 1, 2, 3 and 5, with OpenBLAS's thread count
// given back at GOMAXPROCS when the decoder closes: the forward's GEMM tiles follow the shapes, and every
// BLAS call of the attack (the sampler's products, the forward, the bag's eigenproblem, the
// order's scores) is single-threaded. Bag and order both run, below and past full rank (64
// shield rows on width 64). Run it under GELOATTACK_BLAS=gonum too.
func TestDecodeSameAtAnyWorkerCount(t *testing.T) {
	prevProcs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prevProcs)
	prevThreads := blas.Threads()
	defer blas.SetThreads(prevThreads)
	cfg := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 300, Hidden: 128, Intermediate: 344, Layers: 2,
		Heads: 4, KVHeads: 2, HeadDim: 32, RMSEps: 1e-5, RopeTheta: 10000, MaxPositions: 64}
	m, err := llama.Random(cfg, 11, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := sourceTexts(40, cfg.VocabSize, 5)
	below, past := gelo.DefaultConfig(), gelo.DefaultConfig()
	below.Positives, below.ValFrac = gelo.Fixed(4), 0.3
	below.ShieldFrac, below.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	below.ObserveDtype = gelo.ObserveBF16
	past.Positives, past.ValFrac = gelo.Fixed(4), 0.3
	past.ShieldRows, past.ShieldScale = 128, gelo.Fixed(1)
	var want []byte
	for _, workers := range []int{1, 2, 3, 5} {
		runtime.GOMAXPROCS(workers)
		blas.SetThreads(workers)
		l, err := NewLlama(nil, m, 32)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		for _, sc := range []gelo.Config{below, past} {
			res, err := Run(context.Background(), l, texts, Options{Sampler: sc, Split: data.Train, Batches: 2, Blocks: []int{0, 1}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				r.Seconds = 0
				b, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				got.Write(append(b, '\n'))
			}
		}
		// The decoder's CPU backend runs BLAS single-threaded while it lives; closing it gives
		// the thread count back.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if blas.Threads() != workers && blas.Default().IsOpenBLAS() {
			t.Errorf("OpenBLAS threads %d after Run and Close, want %d restored", blas.Threads(), workers)
		}
		if want == nil {
			want = got.Bytes()
			continue
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: results at GOMAXPROCS %d differ from GOMAXPROCS 1:\n%s\nvs\n%s", blas.Name(), workers, got.Bytes(), want)
		}
	}
}
