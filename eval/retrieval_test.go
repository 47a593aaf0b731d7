package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*(1+math.Abs(b)) }

func TestRetrievalKnownAnswers(t *testing.T) {
	tests := []struct {
		name               string
		scores             []float64
		pos                []int
		mass, top1, recall float64
		chance             float64
	}{
		{"clear win", []float64{0, math.Log(3), 0, 0}, []int{1}, 0.5, 1, 1, 0.25},
		{"tie at the top", []float64{1, 1, 0}, []int{0}, math.E / (2*math.E + 1), 0.5, 0.5, 1.0 / 3},
		// 2nd largest value is 1, shared by 3 candidates for 1 slot; positive 1 is among them.
		{"tie at the cut", []float64{2, 1, 1, 1, 0}, []int{1, 4}, (math.E + 1) / (math.E*math.E + 3*math.E + 1), 0, 1.0 / 6, 0.4},
		{"all equal", []float64{3, 3, 3, 3, 3}, []int{0, 2}, 0.4, 0.4, 0.4, 0.4},
		{"loser", []float64{5, -5}, []int{1}, 1 / (1 + math.Exp(10)), 0, 0, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ScoreRetrieval(tc.scores, tc.pos)
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Mass, tc.mass) || !near(r.Top1, tc.top1) || !near(r.Recall, tc.recall) {
				t.Errorf("mass %v top1 %v recall %v; want %v %v %v", r.Mass, r.Top1, r.Recall, tc.mass, tc.top1, tc.recall)
			}
			for _, c := range []float64{r.ChanceMass, r.ChanceTop1, r.ChanceRecall} {
				if !near(c, tc.chance) {
					t.Errorf("chance %v, want |P|/|C| = %v", c, tc.chance)
				}
			}
		})
	}
}

// permutations calls f with every permutation of 0..n-1.
func permutations(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			f(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

// TestTieBreakingAgreesWithEnumeration checks that top-1 and recall@|P| equal their averages over
// every way of breaking ties (all orderings of the candidates used as a secondary key).
func TestTieBreakingAgreesWithEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	for trial := 0; trial < 200; trial++ {
		c := 2 + rng.IntN(5)
		scores := make([]float64, c)
		for i := range scores {
			scores[i] = float64(rng.IntN(3))
		}
		pos := rng.Perm(c)[:1+rng.IntN(c-1)]
		isPos := make([]bool, c)
		for _, p := range pos {
			isPos[p] = true
		}
		var top1, recall float64
		count := 0
		permutations(c, func(rank []int) {
			// order candidates by score desc, then by rank asc
			order := make([]int, c)
			for i := range order {
				order[i] = i
			}
			for i := 1; i < c; i++ { // insertion sort, c is tiny
				for j := i; j > 0; j-- {
					a, b := order[j-1], order[j]
					if scores[b] > scores[a] || (scores[b] == scores[a] && rank[b] < rank[a]) {
						order[j-1], order[j] = b, a
					}
				}
			}
			if isPos[order[0]] {
				top1++
			}
			hits := 0
			for _, cand := range order[:len(pos)] {
				if isPos[cand] {
					hits++
				}
			}
			recall += float64(hits) / float64(len(pos))
			count++
		})
		top1 /= float64(count)
		recall /= float64(count)
		r, err := ScoreRetrieval(scores, pos)
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.Top1, top1) || !near(r.Recall, recall) {
			t.Fatalf("scores %v positives %v: top1 %v recall %v, enumeration %v %v", scores, pos, r.Top1, r.Recall, top1, recall)
		}
	}
}

func TestRetrievalInvariances(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	scores := make([]float64, 20)
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	pos := []int{3, 7, 11}
	base, _ := ScoreRetrieval(scores, pos)
	shifted := make([]float64, len(scores))
	monotone := make([]float64, len(scores))
	for i, s := range scores {
		shifted[i] = s + 100
		monotone[i] = math.Exp(3*s) - 2
	}
	sh, _ := ScoreRetrieval(shifted, pos)
	mo, _ := ScoreRetrieval(monotone, pos)
	if !near(sh.Mass, base.Mass) || sh.Top1 != base.Top1 || sh.Recall != base.Recall {
		t.Errorf("adding a constant changed the figures: %+v vs %+v", sh, base)
	}
	if mo.Top1 != base.Top1 || mo.Recall != base.Recall {
		t.Errorf("a monotone map changed top-1/recall: %+v vs %+v", mo, base)
	}
}

// TestRandomScoresSitAtChance: scores independent of the positives give figures within a few
// standard errors of the computed chance level, and informative scores give far more.
func TestRandomScoresSitAtChance(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 20))
	const b, c = 4000, 12
	scores := mat.NewDense(b, c, nil)
	good := mat.NewDense(b, c, nil)
	positives := make([][]int, b)
	for i := 0; i < b; i++ {
		positives[i] = rng.Perm(c)[:1+rng.IntN(4)]
		for j := 0; j < c; j++ {
			scores.Set(i, j, rng.NormFloat64())
			good.Set(i, j, rng.NormFloat64())
		}
		for _, p := range positives[i] {
			good.Set(i, p, good.At(i, p)+3)
		}
	}
	var acc, accGood RetrievalAccumulator
	if err := acc.Add(scores, positives); err != nil {
		t.Fatal(err)
	}
	if err := accGood.Add(good, positives); err != nil {
		t.Fatal(err)
	}
	r, g := acc.Result(), accGood.Result()
	for name, m := range map[string]Metric{"mass": r.Mass, "top1": r.Top1, "recall": r.Recall} {
		if m.N != b || math.Abs(m.Mean-m.Chance) > 4*m.StdErr {
			t.Errorf("random %s = %v, not within 4 SE of chance", name, m)
		}
	}
	for name, m := range map[string]Metric{"mass": g.Mass, "top1": g.Top1, "recall": g.Recall} {
		if m.Mean < m.Chance+0.3 {
			t.Errorf("informative %s = %v, want well above chance", name, m)
		}
	}
}

func TestRetrievalRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		s []float64
		p []int
	}{
		"no candidates": {nil, []int{0}},
		"no positives":  {[]float64{1, 2}, nil},
		"out of range":  {[]float64{1, 2}, []int{2}},
		"negative":      {[]float64{1, 2}, []int{-1}},
		"duplicate":     {[]float64{1, 2}, []int{1, 1}},
		"NaN":           {[]float64{1, math.NaN()}, []int{0}},
		"Inf":           {[]float64{math.Inf(1), 0}, []int{0}},
	} {
		if _, err := ScoreRetrieval(tc.s, tc.p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var acc RetrievalAccumulator
	if err := acc.Add(mat.NewDense(2, 3, nil), [][]int{{0}}); err == nil {
		t.Error("batch with missing positive sets: no error")
	}
}
