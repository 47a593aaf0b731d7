package lm

import (
	"math"
	"testing"
)

// TestNgramPPLKnownAnswer works the add-one unigram and bigram perplexities out by hand on a
// three-token vocabulary.
func TestNgramPPLKnownAnswer(t *testing.T) {
	train := []int32{0, 1, 0, 1, 2} // N 5; unigram counts 2 2 1; pairs 01 10 01 12
	prev := []int32{0, 1}
	tgt := []int32{1, 1}
	u, b := ngramPPL(train, 3, prev, tgt)
	// unigram: P(1) = (2+1)/(5+3) for both targets.
	if want := 8.0 / 3; math.Abs(u-want) > 1e-12 {
		t.Errorf("unigram ppl %v, want %v", u, want)
	}
	// bigram: P(1|0) = (2+1)/(2+3); P(1|1) = (0+1)/(2+3) (1 starts two pairs: 10, 12).
	want := math.Exp(-(math.Log(3.0/5) + math.Log(1.0/5)) / 2)
	if math.Abs(b-want) > 1e-12 {
		t.Errorf("bigram ppl %v, want %v", b, want)
	}
}
