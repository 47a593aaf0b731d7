package baselines

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

func relErr(est, truth mat.Matrix) float64 {
	var d mat.Dense
	d.Sub(est, truth)
	return mat.Norm(&d, 2) / mat.Norm(truth, 2)
}

// TestAnchorsRecoverAnchoredPartAndRest: rows 0 and 1 of X are Gaussian, which ICA cannot tell
// apart; the attacker knows rows 0, 2 and 3. Every method must estimate the anchors' mixing
// columns and contribution, and then recover all other rows, Gaussian row 1 included, since once
// row 0 is removed only one Gaussian is left and the rest is identifiable.
func TestAnchorsRecoverAnchoredPartAndRest(t *testing.T) {
	const n, T = 16, 4096
	rng := rand.New(rand.NewPCG(2, 3))
	x := laplaceSources(rng, n, T)
	for i := 0; i < 2; i++ {
		for j := 0; j < T; j++ {
			x.Set(i, j, rng.NormFloat64())
		}
	}
	a := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			a.Set(i, j, rng.NormFloat64())
		}
	}
	var u mat.Dense
	u.Mul(a, x)
	known := []int{0, 2, 3}
	rest := []int{1}
	for i := 4; i < n; i++ {
		rest = append(rest, i)
	}
	anchors := rowsOf(x, known)
	truthRest := rowsOf(x, rest)
	ak := colsOf(a, known)
	var trueAnchored mat.Dense
	trueAnchored.Mul(ak, anchors)

	plain, err := FastICA(context.Background(), &u, FastICAOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pf, _ := eval.ClassicalScore(plain.Sources, x)
	// For information only: within the two Gaussian rows' plane plain ICA is steered by sampling
	// noise alone, which at T = 4096 may or may not land near the true axes.
	t.Logf("plain FastICA: |cos| of the Gaussian rows %.3f, %.3f", absCosOf(pf, 0), absCosOf(pf, 1))

	for _, m := range []AnchorMethod{Subtract, Project, Constrained} {
		res, err := Anchors(context.Background(), &u, anchors, AnchorOptions{Method: m, ICA: FastICAOptions{Seed: 1}})
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		eA, eU := relErr(res.MixingK, ak), relErr(res.Anchored, &trueAnchored)
		f, err := eval.ClassicalScore(res.Rest.Sources, truthRest)
		if err != nil {
			t.Fatal(err)
		}
		row1 := absCosOf(f, 0)
		t.Logf("%v: |Â_K - A_K|/|A_K| %.4f, anchored part error %.4f, rest p95 |cos| %.4f mean %.4f, Gaussian row %.4f",
			m, eA, eU, f.AbsCosP95, f.AbsCosMean, row1)
		// Floor: the other rows' sample correlation with the anchors, ~sqrt((n-k)/T) = 0.056.
		if eA > 0.1 || eU > 0.1 {
			t.Errorf("%v: anchored part not recovered: mixing error %.3f, contribution error %.3f", m, eA, eU)
		}
		if r, c := res.Rest.Sources.Dims(); r != n-len(known) || c != T {
			t.Errorf("%v: rest sources %dx%d", m, r, c)
		}
		if f.AbsCosP95 < 0.95 || f.AbsCosMean < 0.95 || row1 < 0.95 {
			t.Errorf("%v: rest p95 %.3f mean %.3f Gaussian row %.3f; want >= 0.95", m, f.AbsCosP95, f.AbsCosMean, row1)
		}
	}
}

func TestAnchorsRejectBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	u := mix(rng, laplaceSources(rng, 4, 100))
	if _, err := Anchors(context.Background(), u, mat.NewDense(1, 99, nil), AnchorOptions{}); err == nil {
		t.Error("anchor width mismatch accepted")
	}
	if _, err := Anchors(context.Background(), u, mat.NewDense(4, 100, nil), AnchorOptions{}); err == nil {
		t.Error("k = n anchors accepted")
	}
	dup := mat.NewDense(2, 100, nil)
	for j := 0; j < 100; j++ {
		dup.Set(0, j, float64(j))
		dup.Set(1, j, float64(2*j))
	}
	if _, err := Anchors(context.Background(), u, dup, AnchorOptions{Ridge: -1}); err == nil {
		t.Error("linearly dependent anchors accepted without a ridge")
	}
	if _, err := ParseAnchorMethod("nope"); err == nil {
		t.Error("unknown method parsed")
	}
	for _, m := range []AnchorMethod{Subtract, Project, Constrained} {
		if got, err := ParseAnchorMethod(m.String()); err != nil || got != m {
			t.Errorf("round trip of %v: %v, %v", m, got, err)
		}
	}
}

func rowsOf(x *mat.Dense, idx []int) *mat.Dense {
	_, c := x.Dims()
	out := mat.NewDense(len(idx), c, nil)
	for i, r := range idx {
		out.SetRow(i, x.RawRowView(r))
	}
	return out
}

func colsOf(x *mat.Dense, idx []int) *mat.Dense {
	r, _ := x.Dims()
	out := mat.NewDense(r, len(idx), nil)
	for j, c := range idx {
		for i := 0; i < r; i++ {
			out.Set(i, j, x.At(i, c))
		}
	}
	return out
}

// absCosOf returns the matched |cos| of true row i, or 0 when it was not matched.
func absCosOf(f eval.ClassicalFigures, i int) float64 {
	for k, tr := range f.True {
		if tr == i {
			return f.AbsCos[k]
		}
	}
	return 0
}
