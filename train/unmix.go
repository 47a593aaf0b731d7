package train

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/internal/sample"
	"github.com/gelo-research/geloattack/losses/ot"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// DefaultUnmixPoolRows is the default size of a split's distractor pool: enough distinct rows
// that the K-1 distractors of different targets rarely repeat, small enough (32 MiB at
// d = 4096) to hold for both splits.
const DefaultUnmixPoolRows = 2048

// UnmixEvalConfig holds the settings of the SPEC §6 unmix metric.
type UnmixEvalConfig struct {
	// K is the pool size a matched prediction is scored in, its target included
	// (0: eval.DefaultPoolSize).
	K int
	// Tau is the softmax temperature over cosines (0: eval.DefaultUnmixTau).
	Tau float64
	// PoolRows is the number of rows of a split's distractor pool (0: DefaultUnmixPoolRows;
	// a split with fewer rows gives all of them).
	PoolRows int
}

// Unmix is the row-recovery attack (SPEC §4 unmixing head, §5 unmix loss, §6 unmix metrics):
// from U alone, predict the clean rows H.
type Unmix struct {
	model   *settransformer.UnmixModel
	sampler *gelo.Sampler
	corpus  data.Corpus
	loss    ot.Config
	evalCfg UnmixEvalConfig
	seed    uint64
	mask    []float32 // reused (B, N) float mask
	h       []float32 // reused (B, Nmax, d) clean rows
	// pools holds each split's distractor rows, built on first use and then shared by every
	// evaluator (they depend on the seed and the split alone).
	pools map[data.Split]*rowPool
}

// NewUnmix binds an unmixing model to the sampler's corpus. lossCfg is the unmix loss of every
// step (a dustbin variant needs the model built with settransformer.WithLoss of it); evalCfg and
// seed fix the distractor pools and draws of the evaluation.
func NewUnmix(m *settransformer.UnmixModel, s *gelo.Sampler, lossCfg ot.Config, evalCfg UnmixEvalConfig, seed uint64) *Unmix {
	return &Unmix{model: m, sampler: s, corpus: s.Corpus(), loss: lossCfg, evalCfg: evalCfg, seed: seed,
		pools: map[data.Split]*rowPool{}}
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
	u.mask = floatMask(u.mask, b.Mask)
	return settransformer.Batch{B: b.B, N: b.N, U: b.U, Mask: u.mask}
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
	total, err := u.model.ForwardBackward(u.modelBatch(b), t, u.loss)
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
func (u *Unmix) pool(split data.Split) (*rowPool, error) {
	if p, ok := u.pools[split]; ok {
		return p, nil
	}
	size := u.evalCfg.PoolRows
	if size == 0 {
		size = DefaultUnmixPoolRows
	}
	p, err := buildRowPool(u.corpus, u.sampler.Texts(split), size, u.seed^0x706f6f6c^uint64(split)<<56)
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
	if p.d != d {
		return eval.UnmixReport{}, fmt.Errorf("pool rows of width %d for an example of width %d", p.d, d)
	}
	allowed := p.outside(ex.Positives)
	rng := rand.New(rand.NewPCG(u.seed^0x756e6d69786576, uint64(ex.Split)<<56^uint64(ex.Index)))
	random := mat.NewDense(S, d, nil)
	if err := p.draw(rng, allowed, ex.CenterMean, random); err != nil {
		return eval.UnmixReport{}, fmt.Errorf("random rows: %w", err)
	}
	cfg := eval.UnmixConfig{K: u.evalCfg.K, Tau: u.evalCfg.Tau, Draw: func(_ int, dst *mat.Dense) error {
		return p.draw(rng, allowed, ex.CenterMean, dst)
	}}
	return eval.Unmix(mat.NewDense(S, d, widen(pred)), mat.NewDense(ex.NClean, d, widen(ex.H)), random, cfg)
}

// Metrics are the same-embedding mass with its chance level and standard error, the matched
// cosines' mean and p95, and the same figures for random rows of other texts of the split.
func (ev *unmixEval) Metrics() map[string]float64 {
	r := ev.acc.Result()
	return map[string]float64{
		"unmix_mass": r.Mass.Mean, "unmix_mass_chance": r.Mass.Chance, "unmix_mass_se": r.Mass.StdErr,
		"cos_mean": r.CosMean, "cos_p95": r.CosP95,
		"random_mass": r.RandomMass.Mean, "random_mass_chance": r.RandomMass.Chance, "random_mass_se": r.RandomMass.StdErr,
		"random_cos_mean": r.RandomCosMean, "random_cos_p95": r.RandomCosP95,
	}
}

// rowPool is a seeded sample of token rows of one split's texts.
type rowPool struct {
	d    int
	rows []float32 // (P, d)
	text []int64   // (P): the text id of each row
}

// buildRowPool draws size distinct rows uniformly from all rows of texts (all of them when there
// are no more), in corpus order.
func buildRowPool(c data.Corpus, texts []int, size int, seed uint64) (*rowPool, error) {
	if size < 1 {
		return nil, fmt.Errorf("pool size %d, want >= 1", size)
	}
	start := make([]int, len(texts)+1) // start[i]: global index of the first row of texts[i]
	for i, ti := range texts {
		start[i+1] = start[i] + c.NumTokens(ti)
	}
	total := start[len(texts)]
	if total == 0 {
		return nil, fmt.Errorf("the split has no rows")
	}
	var picks []int
	if total <= size {
		picks = make([]int, total)
		for i := range picks {
			picks[i] = i
		}
	} else {
		picks = sample.Distinct(rand.New(rand.NewPCG(seed, 0x64697374)), total, size)
		slices.Sort(picks)
	}
	d := c.D()
	p := &rowPool{d: d, rows: make([]float32, len(picks)*d), text: make([]int64, len(picks))}
	for r, g := range picks {
		i := sort.SearchInts(start, g+1) - 1 // the text holding global row g
		if err := c.Rows(texts[i], g-start[i], 1, p.rows[r*d:(r+1)*d]); err != nil {
			return nil, err
		}
		p.text[r] = c.TextID(texts[i])
	}
	return p, nil
}

// outside lists the pool rows whose text is not one of texts.
func (p *rowPool) outside(texts []int64) []int {
	out := make([]int, 0, len(p.text))
	for r, id := range p.text {
		if !slices.Contains(texts, id) {
			out = append(out, r)
		}
	}
	return out
}

// draw fills the rows of dst with distinct pool rows from allowed, minus center when not nil
// (in float32, as the sampler centres H, so that a row equal to a target stays bit-identical).
func (p *rowPool) draw(rng *rand.Rand, allowed []int, center []float32, dst *mat.Dense) error {
	k, d := dst.Dims()
	if d != p.d {
		return fmt.Errorf("rows of width %d wanted from a pool of width %d", d, p.d)
	}
	if k > len(allowed) {
		return fmt.Errorf("%d rows wanted, the pool has %d rows outside the example's texts (raise the pool size or the corpus)", k, len(allowed))
	}
	for i, a := range sample.Distinct(rng, len(allowed), k) {
		src, row := p.rows[allowed[a]*d:(allowed[a]+1)*d], dst.RawRowView(i)
		for j, v := range src {
			if center != nil {
				v -= center[j]
			}
			row[j] = float64(v)
		}
	}
	return nil
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
