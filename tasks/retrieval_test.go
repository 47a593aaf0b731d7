package tasks

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// retrievalTestTask is a small retrieval model over 40 Gaussian texts (d 16, e 8), 2 positives
// per example, with extra negatives extra texts per step.
func retrievalTestTask(t *testing.T, extra int) (*Retrieval, *gelo.Sampler) {
	t.Helper()
	const d, e = 16, 8
	rng := rand.New(rand.NewPCG(3, 4))
	c := data.NewMemCorpus(d, e)
	for i := 0; i < 40; i++ {
		rows := make([]float32, (6+rng.IntN(4))*d)
		for j := range rows {
			rows[j] = float32(rng.NormFloat64())
		}
		emb := make([]float32, e)
		for j := range emb {
			emb[j] = float32(rng.NormFloat64())
		}
		if err := c.Add(int64(100+i), rows, emb); err != nil {
			t.Fatal(err)
		}
	}
	cfg := gelo.DefaultConfig()
	cfg.Seed, cfg.ValFrac = 2, 0.25
	cfg.Positives, cfg.TokensPerText = gelo.Fixed(2), gelo.Fixed(4)
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := settransformer.New(taskstest.CPU(t), settransformer.Config{InputDim: d, CandidateDim: e, Hidden: 32, Layers: 1, Heads: 4,
		MLPHidden: 64, Eps: settransformer.DefaultEps, Task: settransformer.TaskRetrieval,
		Temperature: settransformer.DefaultTemperature}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return NewRetrieval(m, s, extra, 5), s
}

// TestRetrievalExtraNegatives: a step's candidates are the batch's positives followed by exactly
// extra_negatives distinct texts of the split that are no positive; the same step draws the same
// texts (a resumed run repeats them), another step others; the evaluator adds none.
func TestRetrievalExtraNegatives(t *testing.T) {
	const extra = 6
	task, s := retrievalTestTask(t, extra)
	var exs []*gelo.Example
	var positives []int
	for i := int64(0); i < 3; i++ {
		ex, err := s.Example(data.Train, i)
		if err != nil {
			t.Fatal(err)
		}
		exs = append(exs, ex)
		for _, ti := range ex.PositiveIdx {
			if !slices.Contains(positives, ti) {
				positives = append(positives, ti)
			}
		}
	}
	b, err := gelo.NewBatch(0, exs)
	if err != nil {
		t.Fatal(err)
	}
	// candidates maps the candidate embeddings back to corpus texts (embeddings are distinct).
	candidates := func(step int64, withExtra bool) []int {
		var rng *rand.Rand
		if withExtra {
			rng = rand.New(rand.NewPCG(task.seed^0x6e656761746976, uint64(step)))
		}
		tg, err := task.targets(b, rng)
		if err != nil {
			t.Fatal(err)
		}
		e := task.corpus.E()
		emb := make([]float32, e)
		var out []int
		for c := 0; c < len(tg.Candidates)/e; c++ {
			for ti := 0; ti < task.corpus.NumTexts(); ti++ {
				if err := task.corpus.TextEmbedding(ti, emb); err != nil {
					t.Fatal(err)
				}
				if slices.Equal(emb, tg.Candidates[c*e:(c+1)*e]) {
					out = append(out, ti)
				}
			}
		}
		return out
	}
	got := candidates(7, true)
	if len(got) != len(positives)+extra || !slices.Equal(got[:len(positives)], positives) {
		t.Fatalf("candidates %v, want the positives %v then %d extra texts", got, positives, extra)
	}
	split := s.Texts(data.Train)
	for i, ti := range got[len(positives):] {
		if slices.Contains(positives, ti) || !slices.Contains(split, ti) || slices.Contains(got[len(positives):i+len(positives)], ti) {
			t.Fatalf("extra negative %d (text %d) is a positive, a repeat or outside the split: %v", i, ti, got)
		}
	}
	if again := candidates(7, true); !slices.Equal(again, got) {
		t.Errorf("step 7 drew %v, then %v", got, again)
	}
	if other := candidates(8, true); slices.Equal(other, got) {
		t.Errorf("steps 7 and 8 drew the same extra negatives %v", got)
	}
	if ev := candidates(7, false); !slices.Equal(ev, positives) {
		t.Errorf("evaluation candidates %v, want the positives %v alone", ev, positives)
	}
	l, err := task.Step(b, 7)
	if err != nil || math.IsNaN(l) || l <= 0 {
		t.Fatalf("step with extra negatives: loss %v, %v", l, err)
	}
}
