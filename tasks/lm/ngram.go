package lm

import "math"

// ngram holds the add-one unigram and bigram counts of a train stream: P(b) = (c(b)+1)/(N+V) and
// P(b | a) = (c(a b)+1)/(c(a)+V), with c(a) the count of a as the first token of a train pair.
// Only the bigrams that will be scored are counted, so the table stays the size of the evaluation.
type ngram struct {
	vocab int
	n     int
	uni   []int64 // c(b) over every train token
	first []int64 // c(a) as the first of a pair
	pairs map[uint64]int64
}

// countNgrams counts train in one pass, keeping the bigram counts of the pairs in wanted.
func countNgrams(train []int32, vocab int, wanted [][2][]int32) *ngram {
	g := &ngram{vocab: vocab, n: len(train), uni: make([]int64, vocab), first: make([]int64, vocab), pairs: map[uint64]int64{}}
	for _, w := range wanted {
		for i := range w[0] {
			g.pairs[pairKey(w[0][i], w[1][i])] = 0
		}
	}
	for i, t := range train {
		g.uni[t]++
		if i+1 < len(train) {
			g.first[t]++
			if _, ok := g.pairs[pairKey(t, train[i+1])]; ok {
				g.pairs[pairKey(t, train[i+1])]++
			}
		}
	}
	return g
}

// ppl returns the unigram and bigram perplexities on the (previous, target) pairs, which must be
// among those counted.
func (g *ngram) ppl(prev, target []int32) (unigram, bigram float64) {
	n, v := float64(g.n), float64(g.vocab)
	var su, sb float64
	for i := range prev {
		su -= math.Log((float64(g.uni[target[i]]) + 1) / (n + v))
		sb -= math.Log((float64(g.pairs[pairKey(prev[i], target[i])]) + 1) / (float64(g.first[prev[i]]) + v))
	}
	k := float64(len(prev))
	return math.Exp(su / k), math.Exp(sb / k)
}

// ngramPPL is the add-one perplexities of the model counted on train, scored on the pairs.
func ngramPPL(train []int32, vocab int, prev, target []int32) (unigram, bigram float64) {
	return countNgrams(train, vocab, [][2][]int32{{prev, target}}).ppl(prev, target)
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }
