package eval

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// RetrievalScore holds the retrieval figures of one example and the chance level of each.
type RetrievalScore struct {
	// Mass is sum over positives of softmax(scores).
	Mass float64 `json:"mass"`
	// Top1 is the probability that the best-scoring candidate is a positive, ties broken uniformly
	// at random (so it is a fraction when several candidates share the best score).
	Top1 float64 `json:"top1"`
	// Recall is the expected fraction of positives among the |P| best-scoring candidates, ties
	// broken uniformly at random.
	Recall float64 `json:"recall"`
	// ChanceMass, ChanceTop1 and ChanceRecall are the same figures for scores that carry no
	// information (all equal); each equals |P|/|C|.
	ChanceMass   float64 `json:"chance_mass"`
	ChanceTop1   float64 `json:"chance_top1"`
	ChanceRecall float64 `json:"chance_recall"`
}

// ScoreRetrieval computes the retrieval figures of one example from its candidate scores
// (logits, len |C|) and the indices of its positive candidates (distinct, non-empty). Chance levels
// are obtained by scoring the same positives against constant scores.
func ScoreRetrieval(scores []float64, positives []int) (RetrievalScore, error) {
	if len(scores) == 0 {
		return RetrievalScore{}, fmt.Errorf("eval: no candidates")
	}
	if len(positives) == 0 {
		return RetrievalScore{}, fmt.Errorf("eval: no positives among %d candidates", len(scores))
	}
	for c, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return RetrievalScore{}, fmt.Errorf("eval: score of candidate %d is %v", c, s)
		}
	}
	seen := make(map[int]bool, len(positives))
	for _, p := range positives {
		if p < 0 || p >= len(scores) {
			return RetrievalScore{}, fmt.Errorf("eval: positive index %d outside [0, %d)", p, len(scores))
		}
		if seen[p] {
			return RetrievalScore{}, fmt.Errorf("eval: positive index %d listed twice", p)
		}
		seen[p] = true
	}
	var r RetrievalScore
	r.Mass, r.Top1, r.Recall = retrievalFigures(scores, positives)
	flat := make([]float64, len(scores))
	r.ChanceMass, r.ChanceTop1, r.ChanceRecall = retrievalFigures(flat, positives)
	return r, nil
}

// retrievalFigures returns positive mass, tie-aware top-1 and tie-aware recall@|P| of validated input.
func retrievalFigures(scores []float64, positives []int) (mass, top1, recall float64) {
	best := slices.Max(scores)
	lse := 0.0
	for _, s := range scores {
		lse += math.Exp(s - best)
	}
	lse = best + math.Log(lse)
	for _, p := range positives {
		mass += math.Exp(scores[p] - lse)
	}

	nBest, posBest := 0, 0
	for _, s := range scores {
		if s == best {
			nBest++
		}
	}
	for _, p := range positives {
		if scores[p] == best {
			posBest++
		}
	}
	top1 = float64(posBest) / float64(nBest)

	// The |P| best: every score above the |P|-th largest value v is in; the remaining slots are
	// shared at random among the candidates tied at v.
	k := len(positives)
	sorted := slices.Clone(scores)
	slices.Sort(sorted)
	v := sorted[len(sorted)-k]
	above, tied := 0, 0
	for _, s := range scores {
		switch {
		case s > v:
			above++
		case s == v:
			tied++
		}
	}
	posAbove, posTied := 0, 0
	for _, p := range positives {
		switch {
		case scores[p] > v:
			posAbove++
		case scores[p] == v:
			posTied++
		}
	}
	slots := k - above
	hits := float64(posAbove) + float64(posTied)*float64(slots)/float64(tied)
	recall = hits / float64(k)
	return mass, top1, recall
}

// RetrievalResult summarises retrieval over many examples.
type RetrievalResult struct {
	// Mass is the positive mass, Top1 the top-1 accuracy, Recall the recall@|P|.
	Mass   Metric `json:"mass"`
	Top1   Metric `json:"top1"`
	Recall Metric `json:"recall"`
}

// RetrievalAccumulator averages retrieval figures over any number of batches. The zero value is
// ready to use.
type RetrievalAccumulator struct {
	mass, top1, recall Accumulator
}

// Add scores one batch: scores is (B, C), positives[b] lists example b's positive candidates.
func (a *RetrievalAccumulator) Add(scores mat.Matrix, positives [][]int) error {
	b, c := scores.Dims()
	if len(positives) != b {
		return fmt.Errorf("eval: %d positive sets for %d score rows", len(positives), b)
	}
	row := make([]float64, c)
	for i := 0; i < b; i++ {
		mat.Row(row, i, scores)
		s, err := ScoreRetrieval(row, positives[i])
		if err != nil {
			return fmt.Errorf("example %d of batch: %w", i, err)
		}
		a.AddScore(s)
	}
	return nil
}

// AddScore records one example's figures.
func (a *RetrievalAccumulator) AddScore(s RetrievalScore) {
	a.mass.Add(s.Mass, s.ChanceMass)
	a.top1.Add(s.Top1, s.ChanceTop1)
	a.recall.Add(s.Recall, s.ChanceRecall)
}

// Result returns the means, standard errors and chance levels recorded so far.
func (a *RetrievalAccumulator) Result() RetrievalResult {
	return RetrievalResult{Mass: a.mass.Metric(), Top1: a.top1.Metric(), Recall: a.recall.Metric()}
}
