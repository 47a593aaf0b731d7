package decode

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// vocabChunk is how many vocabulary rows are scored at once.
const vocabChunk = 2048

// readBag scores every vocabulary row at block 0, sets res.Bag to the bag the search extends
// prefixes by (a.search picks it) and scores it against the truth. With BagOnly past full rank
// the bag is also scored by top-k containment, from the same pass.
func (a *attack) readBag(ctx context.Context, res *BatchResult) error {
	sp0 := a.spaces[0]
	withTopK := a.bagOnly && sp0.FullRank() && len(sp0.Ks()) > 0
	scores, topK, err := a.bagScores(ctx, withTopK)
	if err != nil {
		return err
	}
	res.Bag, a.bagCut = a.search.bag(a, scores, res.NObs)
	a.report("bag: %d tokens of %d", len(res.Bag), len(scores))
	truth := distinct(res.Truth)
	res.scoreBag(scores, truth)
	if withTopK {
		res.BagMarginTopK, res.BagTopK = bestTopKMargin(topK, sp0.Ks(), truth)
		if j := slices.Index(sp0.Ks(), res.BagTopK); j >= 0 { // -1 when no k gave a finite margin
			res.BagRankRecallTopK, _ = rankRecall(topK[j], truth)
		}
	}
	return nil
}

// bagScores scores every vocabulary row of block 0 against U_0 (its excess over the bound, by
// the residual below full rank and the leverage at full rank) and, with topK, also by top-k
// containment: per k of the space's Ks, log10 of the fraction of the row's energy outside U_0's
// top k right singular directions, from the same Score of each chunk.
func (a *attack) bagScores(ctx context.Context, topK bool) ([]float64, [][]float64, error) {
	sp := a.spaces[0]
	v := a.m.Vocab()
	out := make([]float64, 0, v)
	var tk [][]float64 // (len(Ks), vocab)
	if topK {
		tk = make([][]float64, len(sp.Ks()))
	}
	buf := make([]float32, vocabChunk*a.d) // (vocabChunk, d)
	for lo := 0; lo < v; lo += vocabChunk {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		hi := min(v, lo+vocabChunk)
		if err := a.m.Block0(lo, hi, buf[:(hi-lo)*a.d]); err != nil {
			return nil, nil, fmt.Errorf("vocabulary rows [%d, %d): %w", lo, hi, err)
		}
		sc, err := sp.Score(toDense(buf[:(hi-lo)*a.d], hi-lo, a.d))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, a.excessOf(0, sc)...)
		for j := range tk {
			for _, r := range sc.TopK[j] {
				tk[j] = append(tk[j], math.Log10(max(r, 1e-300)))
			}
		}
	}
	return out, tk, nil
}

// certifiedBag is the certified tokens, best first, at most nObs of them (a batch of n_obs
// observed rows holds at most that many distinct tokens).
func certifiedBag(scores []float64, nObs int) []int {
	var bag []int
	for v, e := range scores {
		if e <= 0 {
			bag = append(bag, v)
		}
	}
	sort.SliceStable(bag, func(i, j int) bool { return scores[bag[i]] < scores[bag[j]] })
	if len(bag) > nObs {
		bag = bag[:nObs]
	}
	return bag
}

// rankBag is the nObs best-scoring tokens, best first: the bag as ranking alone gives it, without
// a bound (a batch of nObs observed rows shows at most that many distinct tokens; the order
// search then uses only those its ranking picks).
func rankBag(scores []float64, nObs int) []int {
	return ascending(scores)[:min(nObs, len(scores))]
}

// scoreBag sets the bag's figures against truth, the batch's distinct tokens: precision and
// recall of r.Bag, and the margin and ranking recall of the vocabulary's scores (vocab). The
// top-k figures start unmeasured (NaN).
func (r *BatchResult) scoreBag(scores []float64, truth map[int]bool) {
	hit := 0
	for _, v := range r.Bag {
		if truth[v] {
			hit++
		}
	}
	if len(r.Bag) > 0 {
		r.BagPrecision = float64(hit) / float64(len(r.Bag))
	}
	r.BagRecall = float64(hit) / float64(len(truth))
	r.BagMargin = separation(scores, truth)
	r.BagRankRecall, r.BagWorstRank = rankRecall(scores, truth)
	r.BagMarginTopK, r.BagRankRecallTopK = math.NaN(), math.NaN()
}

// distinct is the set of tokens of texts.
func distinct(texts [][]int) map[int]bool {
	set := map[int]bool{}
	for _, t := range texts {
		for _, v := range t {
			set[v] = true
		}
	}
	return set
}

// bestTopKMargin is the best separation of the true tokens from the rest over the top-k scores
// (one per k of ks), and its k: the score leverage does not cover, tried before a setting is
// called a defence of the bag.
func bestTopKMargin(topK [][]float64, ks []int, truth map[int]bool) (float64, int) {
	best, bestK := math.Inf(-1), 0
	for j, k := range ks {
		if m := separation(topK[j], truth); m > best {
			best, bestK = m, k
		}
	}
	return best, bestK
}

// separation is the best score outside set minus the worst inside (decades).
func separation(scores []float64, set map[int]bool) float64 {
	worstIn, bestOut := math.Inf(-1), math.Inf(1)
	for v, e := range scores {
		if set[v] {
			worstIn = max(worstIn, e)
		} else {
			bestOut = min(bestOut, e)
		}
	}
	return bestOut - worstIn
}

// rankRecall is the fraction of set among the len(set) lowest scores, in the order rankBag takes
// them (ascending), and the 1-based rank of set's worst-scoring member.
func rankRecall(scores []float64, set map[int]bool) (float64, int) {
	if len(set) == 0 {
		return math.NaN(), 0
	}
	hit, worst := 0, 0
	for r, v := range ascending(scores) {
		if set[v] {
			if r < len(set) {
				hit++
			}
			worst = r + 1
		}
	}
	return float64(hit) / float64(len(set)), worst
}

// ascending is the indices of scores, best (lowest) first; ties keep their order.
func ascending(scores []float64) []int {
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] < scores[order[j]] })
	return order
}
