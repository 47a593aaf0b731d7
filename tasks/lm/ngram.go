package lm

import "math"

// ngramPPL returns the perplexities of the add-one unigram and bigram models counted on train,
// scored on the given (previous, target) pairs: P(b) = (c(b)+1)/(N+V) and
// P(b | a) = (c(a b)+1)/(c(a)+V), with c(a) the count of a as the first token of a train pair.
// Only the bigrams that are scored are counted, so the table stays the size of the evaluation.
func ngramPPL(train []int32, vocab int, prev, target []int32) (unigram, bigram float64) {
	uni := make([]int64, vocab)   // c(b) over every train token
	first := make([]int64, vocab) // c(a) as the first of a pair
	want := make(map[uint64]int64, len(prev))
	for i := range prev {
		want[pairKey(prev[i], target[i])] = 0
	}
	for i, t := range train {
		uni[t]++
		if i+1 < len(train) {
			first[t]++
			if _, ok := want[pairKey(t, train[i+1])]; ok {
				want[pairKey(t, train[i+1])]++
			}
		}
	}
	n, v := float64(len(train)), float64(vocab)
	var su, sb float64
	for i := range prev {
		su -= math.Log((float64(uni[target[i]]) + 1) / (n + v))
		sb -= math.Log((float64(want[pairKey(prev[i], target[i])]) + 1) / (float64(first[prev[i]]) + v))
	}
	k := float64(len(prev))
	return math.Exp(su / k), math.Exp(sb / k)
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }
