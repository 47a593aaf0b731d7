package eval

import (
	"errors"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/eval/assign"
	"gonum.org/v1/gonum/mat"
)

// Defaults of UnmixConfig.
const (
	// DefaultPoolSize is K, the size of the pool each matched prediction is scored against.
	DefaultPoolSize = 16
	// DefaultUnmixTau is the softmax temperature over cosines, the InfoNCE default of SPEC §5.
	DefaultUnmixTau = 0.05
)

// DrawFunc writes distractor rows for the prediction matched to clean row target into dst, whose
// shape (K-1, d) is set by the caller. Distractors must come from texts other than the example's.
type DrawFunc func(target int, dst *mat.Dense) error

// UnmixConfig parameterises the same-embedding mass.
type UnmixConfig struct {
	// K is the pool size, target included (0: DefaultPoolSize).
	K int
	// Tau is the softmax temperature over cosines (0: DefaultUnmixTau).
	Tau float64
	// Draw supplies the K-1 distractors of each matched prediction. Required.
	Draw DrawFunc
}

// UnmixPair is one matched prediction.
type UnmixPair struct {
	// Pred and Clean are the matched row indices of the prediction and of the clean rows.
	Pred  int `json:"pred"`
	Clean int `json:"clean"`
	// Cos is cos(prediction, target).
	Cos float64 `json:"cos"`
	// Mass is the softmax(cos/tau) mass of the pool entries bit-identical to the target.
	Mass float64 `json:"mass"`
	// Chance is the mass a uniform softmax gives those entries: (#identical entries)/K.
	Chance float64 `json:"chance"`
}

// UnmixFigures are the unmix figures of one prediction against one example's clean rows.
type UnmixFigures struct {
	// Mass and Chance are the means of the pairs' masses and chance levels.
	Mass   float64 `json:"mass"`
	Chance float64 `json:"chance"`
	// CosMean and CosP95 are the mean and 95th percentile of the matched cosines.
	CosMean float64 `json:"cos_mean"`
	CosP95  float64 `json:"cos_p95"`
	// Pairs lists every matched prediction; min(S, n_clean) of them.
	Pairs []UnmixPair `json:"pairs,omitempty"`
}

// UnmixMass matches the predicted rows pred (S, d) one-to-one to the clean rows clean (n_clean, d)
// by a global Hungarian assignment on cost 1 - cos, then scores each matched prediction against a
// pool of its target plus K-1 distractors from cfg.Draw: its mass is softmax(cos/tau) over the pool
// summed over the entries bit-identical to the target, and its chance level is the same sum for a
// uniform softmax. Only min(S, n_clean) predictions are matched; the others are not scored.
func UnmixMass(pred, clean *mat.Dense, cfg UnmixConfig) (UnmixFigures, error) {
	if cfg.K == 0 {
		cfg.K = DefaultPoolSize
	}
	if cfg.Tau == 0 {
		cfg.Tau = DefaultUnmixTau
	}
	if cfg.K < 1 {
		return UnmixFigures{}, fmt.Errorf("eval: pool size K = %d, want >= 1", cfg.K)
	}
	if cfg.Tau < 0 || math.IsNaN(cfg.Tau) || math.IsInf(cfg.Tau, 0) {
		return UnmixFigures{}, fmt.Errorf("eval: unmix temperature %v, want > 0", cfg.Tau)
	}
	if cfg.Draw == nil && cfg.K > 1 {
		return UnmixFigures{}, errors.New("eval: unmix mass needs a distractor DrawFunc")
	}
	s, d := pred.Dims()
	nc, dc := clean.Dims()
	if d != dc {
		return UnmixFigures{}, fmt.Errorf("eval: predictions have width %d, clean rows %d", d, dc)
	}
	if err := checkFinite("prediction", pred); err != nil {
		return UnmixFigures{}, err
	}
	if err := checkFinite("clean row", clean); err != nil {
		return UnmixFigures{}, err
	}
	cos, err := CosineMatrix(pred, clean) // (S, n_clean)
	if err != nil {
		return UnmixFigures{}, err
	}
	cost := mat.NewDense(s, nc, nil)
	cost.Apply(func(_, _ int, c float64) float64 { return 1 - c }, cos)
	match, err := assign.Minimize(cost)
	if err != nil {
		return UnmixFigures{}, fmt.Errorf("eval: matching predictions to clean rows: %w", err)
	}

	var out UnmixFigures
	var distract *mat.Dense
	if cfg.K > 1 {
		distract = mat.NewDense(cfg.K-1, d, nil)
	}
	predNorms := rowNorms(pred)
	logits := make([]float64, cfg.K)
	var cosines []float64
	for _, p := range match.Pairs() {
		j, k := p[0], p[1]
		target := clean.RawRowView(k)
		h := pred.RawRowView(j)
		identical := []bool{true}
		logits[0] = cos.At(j, k) / cfg.Tau
		if distract != nil {
			if err := cfg.Draw(k, distract); err != nil {
				return UnmixFigures{}, fmt.Errorf("eval: drawing distractors for clean row %d: %w", k, err)
			}
			if err := checkFinite("distractor", distract); err != nil {
				return UnmixFigures{}, err
			}
			for i := 0; i < cfg.K-1; i++ {
				row := distract.RawRowView(i)
				logits[i+1] = cosine(h, row, predNorms[j], math.Sqrt(sumSq(row))) / cfg.Tau
				identical = append(identical, bitIdentical(row, target))
			}
		}
		mass, chance := poolMass(logits, identical)
		out.Pairs = append(out.Pairs, UnmixPair{Pred: j, Clean: k, Cos: cos.At(j, k), Mass: mass, Chance: chance})
		cosines = append(cosines, cos.At(j, k))
	}
	if n := len(out.Pairs); n > 0 {
		for _, p := range out.Pairs {
			out.Mass += p.Mass / float64(n)
			out.Chance += p.Chance / float64(n)
			out.CosMean += p.Cos / float64(n)
		}
		out.CosP95 = Percentile(cosines, 0.95)
	}
	return out, nil
}

// poolMass returns the softmax mass of the flagged pool entries and the uniform softmax's mass of them.
func poolMass(logits []float64, flagged []bool) (mass, chance float64) {
	best := math.Inf(-1)
	for _, l := range logits {
		best = max(best, l)
	}
	total := 0.0
	for i, l := range logits {
		e := math.Exp(l - best)
		total += e
		if flagged[i] {
			mass += e
			chance++
		}
	}
	return mass / total, chance / float64(len(logits))
}

// bitIdentical reports whether two rows hold exactly the same bits (so -0 differs from +0).
func bitIdentical(a, b []float64) bool {
	for i, x := range a {
		if math.Float64bits(x) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// UnmixReport holds an attack's unmix figures beside those of random rows of the split.
type UnmixReport struct {
	// Model holds the figures of the attack's prediction.
	Model UnmixFigures `json:"model"`
	// Random holds the figures of the random-rows prediction; nil when none was given.
	Random *UnmixFigures `json:"random,omitempty"`
}

// Unmix computes UnmixMass for pred and, when random is not nil, for the random-rows prediction
// random (e.g. drawn with splitpool.Rows, as the unmix task does), both against the same clean
// rows.
func Unmix(pred, clean, random *mat.Dense, cfg UnmixConfig) (UnmixReport, error) {
	m, err := UnmixMass(pred, clean, cfg)
	if err != nil {
		return UnmixReport{}, err
	}
	rep := UnmixReport{Model: m}
	if random != nil {
		r, err := UnmixMass(random, clean, cfg)
		if err != nil {
			return UnmixReport{}, fmt.Errorf("random rows: %w", err)
		}
		rep.Random = &r
	}
	return rep, nil
}

// UnmixSummary summarises unmix figures over many examples.
type UnmixSummary struct {
	// Mass averages the examples' mean pair masses (standard error over examples).
	Mass Metric `json:"mass"`
	// CosMean and CosP95 pool the matched cosines of every example.
	CosMean float64 `json:"cos_mean"`
	CosP95  float64 `json:"cos_p95"`
	// RandomMass, RandomCosMean and RandomCosP95 are the same for the random-rows prediction.
	RandomMass    Metric  `json:"random_mass"`
	RandomCosMean float64 `json:"random_cos_mean"`
	RandomCosP95  float64 `json:"random_cos_p95"`
}

// UnmixAccumulator collects UnmixReports. The zero value is ready to use.
type UnmixAccumulator struct {
	mass, randMass Accumulator
	cos, randCos   []float64
}

// Add records one example's report.
func (a *UnmixAccumulator) Add(r UnmixReport) {
	a.mass.Add(r.Model.Mass, r.Model.Chance)
	for _, p := range r.Model.Pairs {
		a.cos = append(a.cos, p.Cos)
	}
	if r.Random != nil {
		a.randMass.Add(r.Random.Mass, r.Random.Chance)
		for _, p := range r.Random.Pairs {
			a.randCos = append(a.randCos, p.Cos)
		}
	}
}

// Result returns the summary of everything recorded; figures with no data are NaN.
func (a *UnmixAccumulator) Result() UnmixSummary {
	return UnmixSummary{
		Mass: a.mass.Metric(), CosMean: mean(a.cos), CosP95: Percentile(a.cos, 0.95),
		RandomMass: a.randMass.Metric(), RandomCosMean: mean(a.randCos), RandomCosP95: Percentile(a.randCos, 0.95),
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
