package tasks

import (
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/splitpool"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// Retrieval is the text-presence attack (SPEC §4 retrieval head, §5 InfoNCE, §6 retrieval
// metrics): from U alone, rank candidate texts so that the example's positive texts come first.
type Retrieval struct {
	model   *settransformer.Model
	corpus  data.Corpus
	sampler *gelo.Sampler
	// extraNegatives random texts of the split join each step's in-batch candidates.
	extraNegatives int
	seed           uint64
	mask           []float32 // reused (B, N) float mask
}

// NewRetrieval binds a retrieval model to the sampler's corpus. Each step's extraNegatives extra
// negative texts (splitpool.ExtraTexts) are drawn from a stream seeded by (seed, step).
func NewRetrieval(m *settransformer.Model, s *gelo.Sampler, extraNegatives int, seed uint64) *Retrieval {
	return &Retrieval{model: m, corpus: s.Corpus(), sampler: s, extraNegatives: extraNegatives, seed: seed}
}

// Params is the model's parameter buffer.
func (r *Retrieval) Params() *engine.Params { return r.model.Params() }

// Model is the underlying set transformer.
func (r *Retrieval) Model() *settransformer.Model { return r.model }

// modelBatch views a sampler batch as the model's input; the float mask buffer is reused.
func (r *Retrieval) modelBatch(b *gelo.Batch) settransformer.Batch {
	return modelBatch(&r.mask, b)
}

// targets builds the in-batch candidate set (plus extra negatives drawn from rng when non-nil,
// by splitpool's rule: distinct texts of the split outside the batch's positives) and each
// example's positive indices into it. cand: (C, e).
func (r *Retrieval) targets(b *gelo.Batch, rng *rand.Rand) (settransformer.Targets, error) {
	pos := make([][]int, b.B) // corpus indices of each example's positive texts
	for i, ex := range b.Examples {
		pos[i] = ex.PositiveIdx
	}
	var extra []int
	if rng != nil && r.extraNegatives > 0 {
		var positives []int
		for _, ps := range pos {
			positives = append(positives, ps...)
		}
		extra = splitpool.ExtraTexts(rng, r.sampler.Texts(b.Examples[0].Split), positives, r.extraNegatives)
	}
	cands, p, err := splitpool.Candidates(pos, extra)
	if err != nil {
		return settransformer.Targets{}, err
	}
	e := r.corpus.E()
	cand := make([]float32, len(cands)*e)
	for c, ti := range cands {
		if err := r.corpus.TextEmbedding(ti, cand[c*e:(c+1)*e]); err != nil {
			return settransformer.Targets{}, fmt.Errorf("candidate text %d: %w", r.corpus.TextID(ti), err)
		}
	}
	return settransformer.Targets{Candidates: cand, Positives: p}, nil
}

// Step runs forward and backward of one batch.
func (r *Retrieval) Step(b *gelo.Batch, step int64) (float64, error) {
	rng := rand.New(rand.NewPCG(r.seed^0x6e656761746976, uint64(step)))
	t, err := r.targets(b, rng)
	if err != nil {
		return 0, err
	}
	loss, err := r.model.ForwardBackward(r.modelBatch(b), t)
	return float64(loss), err
}

// NewEvaluator starts a retrieval evaluation: candidates are each batch's positives (no extra
// negatives, so the chance level is |P|/|C| of the in-batch set), scored as training scores them
// (Model.Scores: cos/tau on the tape).
func (r *Retrieval) NewEvaluator() Evaluator { return &retrievalEval{task: r} }

type retrievalEval struct {
	task *Retrieval
	acc  eval.RetrievalAccumulator
}

// Add scores one batch: s_bc = cos(q_b, emb_c) / tau.
func (ev *retrievalEval) Add(b *gelo.Batch) error {
	r := ev.task
	t, err := r.targets(b, nil)
	if err != nil {
		return err
	}
	s, err := r.model.Scores(r.modelBatch(b), t.Candidates) // (B, C)
	if err != nil {
		return err
	}
	c := len(s) / b.B
	scores := mat.NewDense(b.B, c, nil)
	for i := range b.B {
		for j := range c {
			scores.Set(i, j, float64(s[i*c+j]))
		}
	}
	return ev.acc.Add(scores, t.Positives)
}

// Metrics are the positive mass, top-1 and recall@|P| with chance levels and standard errors
// (keys: eval.RetrievalResult.Metrics).
func (ev *retrievalEval) Metrics() map[string]float64 { return ev.acc.Result().Metrics() }
