package eval

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/eval/assign"
	"gonum.org/v1/gonum/mat"
)

// ClassicalFigures are the classical BSS figures of one estimate against the true rows.
type ClassicalFigures struct {
	// AbsCosMean, AbsCosMedian and AbsCosP95 summarise |cos| over the matched pairs.
	AbsCosMean   float64 `json:"abs_cos_mean"`
	AbsCosMedian float64 `json:"abs_cos_median"`
	AbsCosP95    float64 `json:"abs_cos_p95"`
	// GramErr is ||G_est - G_true||_F / ||G_true||_F over the matched rows, rows taken as given.
	GramErr float64 `json:"gram_err"`
	// GramErrAligned is the same after scaling each estimated row by the least-squares factor
	// (sign included) onto its match, which removes the scale and sign that BSS cannot identify.
	// It uses the true rows, so it is a diagnostic of the best case, not an attack.
	GramErrAligned float64 `json:"gram_err_aligned"`
	// Est[i] is matched to True[i], and AbsCos[i] is their |cos|.
	Est    []int     `json:"est"`
	True   []int     `json:"true"`
	AbsCos []float64 `json:"abs_cos"`
}

// ClassicalReport holds the figures of an estimate beside those of a baseline estimate.
type ClassicalReport struct {
	// Estimate holds the attack's figures.
	Estimate ClassicalFigures `json:"estimate"`
	// Baseline holds the same figures for the baseline rows (the chance level); nil when none.
	Baseline *ClassicalFigures `json:"baseline,omitempty"`
}

// Classical computes ClassicalFigures for est and, when baseline is not nil, for baseline (for
// example random rows of the split drawn with splitpool.Rows), both against truth.
func Classical(est, truth, baseline *mat.Dense) (ClassicalReport, error) {
	e, err := ClassicalScore(est, truth)
	if err != nil {
		return ClassicalReport{}, err
	}
	rep := ClassicalReport{Estimate: e}
	if baseline != nil {
		b, err := ClassicalScore(baseline, truth)
		if err != nil {
			return ClassicalReport{}, fmt.Errorf("baseline rows: %w", err)
		}
		rep.Baseline = &b
	}
	return rep, nil
}

// ClassicalScore matches the estimated rows est (S, d) one-to-one to the true rows truth (n, d) by
// a Hungarian assignment on cost 1 - |cos| (BSS recovers rows only up to sign and scale) and
// returns |cos| statistics and the Gram errors over the min(S, n) matched pairs.
func ClassicalScore(est, truth *mat.Dense) (ClassicalFigures, error) {
	s, d := est.Dims()
	n, dt := truth.Dims()
	if d != dt {
		return ClassicalFigures{}, fmt.Errorf("eval: estimated rows have width %d, true rows %d", d, dt)
	}
	if err := checkFinite("estimate", est); err != nil {
		return ClassicalFigures{}, err
	}
	if err := checkFinite("true row", truth); err != nil {
		return ClassicalFigures{}, err
	}
	cos, err := CosineMatrix(est, truth) // (S, n)
	if err != nil {
		return ClassicalFigures{}, err
	}
	cost := mat.NewDense(s, n, nil)
	cost.Apply(func(_, _ int, c float64) float64 { return 1 - math.Abs(c) }, cos)
	match, err := assign.Minimize(cost)
	if err != nil {
		return ClassicalFigures{}, fmt.Errorf("eval: matching estimates to true rows: %w", err)
	}
	var f ClassicalFigures
	for _, p := range match.Pairs() {
		f.Est = append(f.Est, p[0])
		f.True = append(f.True, p[1])
		f.AbsCos = append(f.AbsCos, math.Abs(cos.At(p[0], p[1])))
	}
	if len(f.AbsCos) == 0 {
		return f, fmt.Errorf("eval: nothing to match (%d estimates, %d true rows)", s, n)
	}
	f.AbsCosMean = mean(f.AbsCos)
	f.AbsCosMedian = Percentile(f.AbsCos, 0.5)
	f.AbsCosP95 = Percentile(f.AbsCos, 0.95)

	k := len(f.Est)
	em := mat.NewDense(k, d, nil) // matched estimates, in pair order
	tm := mat.NewDense(k, d, nil) // their true rows
	al := mat.NewDense(k, d, nil) // estimates scaled onto their matches
	for i := range f.Est {
		e, t := est.RawRowView(f.Est[i]), truth.RawRowView(f.True[i])
		em.SetRow(i, e)
		tm.SetRow(i, t)
		scale := 0.0
		if ee := sumSq(e); ee > 0 {
			scale = dot(e, t) / ee
		}
		row := al.RawRowView(i)
		for j, x := range e {
			row[j] = scale * x
		}
	}
	f.GramErr = GramError(em, tm)
	f.GramErrAligned = GramError(al, tm)
	return f, nil
}

// GramError returns ||X X^T - Y Y^T||_F / ||Y Y^T||_F for row sets x and y of equal shape (k, d);
// +Inf when Y Y^T is zero and X X^T is not, 0 when both are.
func GramError(x, y *mat.Dense) float64 {
	var gx, gy mat.SymDense
	gx.SymOuterK(1, x)
	gy.SymOuterK(1, y)
	var diff mat.Dense
	diff.Sub(&gx, &gy)
	num, den := mat.Norm(&diff, 2), mat.Norm(&gy, 2)
	if den == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return num / den
}
