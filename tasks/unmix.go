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
	"github.com/gelo-research/geloattack/losses/ot"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// UnmixEvalConfig holds the settings of the SPEC §6 unmix metric.
type UnmixEvalConfig struct {
	// K is the pool size a matched prediction is scored in, its target included
	// (0: eval.DefaultPoolSize).
	K int
	// Tau is the softmax temperature over cosines (0: eval.DefaultUnmixTau).
	Tau float64
	// PoolRows is the number of rows of a split's distractor pool (0: splitpool.DefaultRows;
	// a split with fewer rows gives all of them).
	PoolRows int
}

// Unmix is the row-recovery attack (SPEC §4 unmixing head, §5 unmix loss, §6 unmix metrics):
// from U alone, predict the clean rows H.
type Unmix struct {
	model   *settransformer.UnmixModel
	sampler *gelo.Sampler
	corpus  data.Corpus
	evalCfg UnmixEvalConfig
	seed    uint64
	mask    []float32 // reused (B, N) float mask
	h       []float32 // reused (B, Nmax, d) clean rows
	// pools holds each split's distractor rows, built on first use and then shared by every
	// evaluator (they depend on the seed and the split alone).
	pools map[data.Split]*splitpool.Rows
}

// NewUnmix builds the unmixing model of cfg on be, with parameters initialised from seed, for
// training with the unmix loss (which the model checks once and keeps, registering the dustbin
// score when the variant has one), and binds it to the sampler's corpus. The loss configuration
// reaches the model here and nowhere else. evalCfg and seed fix the distractor pools and draws of
// the evaluation.
func NewUnmix(be engine.Backend, cfg settransformer.Config, loss ot.Config, s *gelo.Sampler, evalCfg UnmixEvalConfig, seed uint64) (*Unmix, error) {
	m, err := settransformer.NewUnmix(be, cfg, seed, settransformer.WithLoss(loss))
	if err != nil {
		return nil, err
	}
	return &Unmix{model: m, sampler: s, corpus: s.Corpus(), evalCfg: evalCfg, seed: seed,
		pools: map[data.Split]*splitpool.Rows{}}, nil
}

// Params is the model's parameter buffer.
func (u *Unmix) Params() *engine.Params { return u.model.Params() }

// Model is the underlying unmixing model.
func (u *Unmix) Model() *settransformer.UnmixModel { return u.model }

// LastParts reads back the loss terms of the latest Step (keys of ot.Parts.Values: "unmix",
// "unmix_cyc", "unmix_ot", "unmix_a_reg", "unmix_norm"; see UnmixModel.LossParts). Step leaves
// them on the device, since each read-back is a device sync and the trainer reports only the
// total; nil before the first Step and once an evaluation has run since.
func (u *Unmix) LastParts() map[string]float64 { return u.model.LossParts() }

// modelBatch views a sampler batch as the model's input; the float mask buffer is reused.
func (u *Unmix) modelBatch(b *gelo.Batch) settransformer.Batch {
	return modelBatch(&u.mask, b)
}

// targets gathers the examples' clean rows, zero-padded to the largest count: H (B, Nmax, d).
func (u *Unmix) targets(b *gelo.Batch) (settransformer.UnmixTargets, error) {
	if len(b.Examples) != b.B {
		return settransformer.UnmixTargets{}, fmt.Errorf("unmix targets: batch of %d holds %d examples", b.B, len(b.Examples))
	}
	d, nmax := b.D, 0
	for _, ex := range b.Examples {
		if ex.D != d || len(ex.H) != ex.NClean*d {
			return settransformer.UnmixTargets{}, fmt.Errorf("unmix targets: example %d has %d clean values for %d rows of width %d (batch width %d)",
				ex.Index, len(ex.H), ex.NClean, ex.D, d)
		}
		nmax = max(nmax, ex.NClean)
	}
	if cap(u.h) < b.B*nmax*d {
		u.h = make([]float32, b.B*nmax*d)
	}
	t := settransformer.UnmixTargets{H: u.h[:b.B*nmax*d], CleanRows: make([]int, b.B), MeanNorm: make([]float32, b.B)}
	for i, ex := range b.Examples {
		dst := t.H[i*nmax*d : (i+1)*nmax*d]
		clear(dst[copy(dst, ex.H):])
		t.CleanRows[i], t.MeanNorm[i] = ex.NClean, float32(ex.M)
	}
	return t, nil
}

// Step runs forward and backward of one batch and returns the total unmix loss, the one value it
// reads back to the host; LastParts reads the terms on demand.
func (u *Unmix) Step(b *gelo.Batch, _ int64) (float64, error) {
	t, err := u.targets(b)
	if err != nil {
		return 0, err
	}
	total, err := u.model.ForwardBackward(u.modelBatch(b), t)
	if err != nil {
		return 0, err
	}
	return float64(total), nil
}

// NewEvaluator starts an unmix evaluation: each example's predicted rows are matched to its clean
// rows and scored against distractor rows of other texts of its split (SPEC §6), beside S random
// rows of those texts as the reference prediction.
func (u *Unmix) NewEvaluator() Evaluator { return &unmixEval{task: u} }

// pool returns the split's distractor pool, building it on first use.
func (u *Unmix) pool(split data.Split) (*splitpool.Rows, error) {
	if p, ok := u.pools[split]; ok {
		return p, nil
	}
	size := u.evalCfg.PoolRows
	if size == 0 {
		size = splitpool.DefaultRows
	}
	p, err := splitpool.NewRows(u.corpus, u.sampler.Texts(split), size, splitpool.RowsSeed(u.seed, split))
	if err != nil {
		return nil, fmt.Errorf("unmix distractor pool of split %s: %w", split, err)
	}
	u.pools[split] = p
	return p, nil
}

type unmixEval struct {
	task *Unmix
	acc  eval.UnmixAccumulator
}

// Add scores one batch (forward only).
func (ev *unmixEval) Add(b *gelo.Batch) error {
	u := ev.task
	out, err := u.model.Forward(u.modelBatch(b))
	if err != nil {
		return err
	}
	hHat := out.HHat.ToHost() // (B, S, d)
	S, d := out.HHat.Dim(1), out.HHat.Dim(2)
	if len(b.Examples) != b.B || b.D != d {
		return fmt.Errorf("unmix eval: batch of %d examples of width %d for %d sets of width %d", len(b.Examples), b.D, b.B, d)
	}
	for i, ex := range b.Examples {
		rep, err := u.score(ex, hHat[i*S*d:(i+1)*S*d], S)
		if err != nil {
			return fmt.Errorf("unmix eval: example %s/%d: %w", ex.Split, ex.Index, err)
		}
		ev.acc.Add(rep)
	}
	return nil
}

// score is SPEC §6 for one example: pred (S, d) against its clean rows, distractors and random
// rows drawn (seeded by the example) from the split's pool outside the example's positive texts
// and centred like its clean rows.
func (u *Unmix) score(ex *gelo.Example, pred []float32, S int) (eval.UnmixReport, error) {
	p, err := u.pool(ex.Split)
	if err != nil {
		return eval.UnmixReport{}, err
	}
	d := ex.D
	if p.D() != d {
		return eval.UnmixReport{}, fmt.Errorf("pool rows of width %d for an example of width %d", p.D(), d)
	}
	allowed := p.Outside(ex.Positives)
	rng := rand.New(rand.NewPCG(u.seed^0x756e6d69786576, uint64(ex.Split)<<56^uint64(ex.Index)))
	random := mat.NewDense(S, d, nil)
	if err := p.Draw(rng, allowed, ex.CenterMean, random); err != nil {
		return eval.UnmixReport{}, fmt.Errorf("random rows: %w", err)
	}
	cfg := eval.UnmixConfig{K: u.evalCfg.K, Tau: u.evalCfg.Tau, Draw: func(_ int, dst *mat.Dense) error {
		return p.Draw(rng, allowed, ex.CenterMean, dst)
	}}
	return eval.Unmix(mat.NewDense(S, d, widen(pred)), mat.NewDense(ex.NClean, d, widen(ex.H)), random, cfg)
}

// Metrics are the same-embedding mass with its chance level and standard error, the matched
// cosines' mean and p95, and the same figures for random rows of other texts of the split (keys:
// eval.UnmixSummary.Metrics).
func (ev *unmixEval) Metrics() map[string]float64 { return ev.acc.Result().Metrics() }
