package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/decode"
)

// printDecode's bag-only totals average the batches' precision, recall and ranking recall and
// take the worst margin and the worst rank of a true token; the order's columns show "-".
func TestPrintDecodeBagOnly(t *testing.T) {
	res := []decode.BatchResult{
		{Index: 0, Truth: [][]int{{1, 2}}, N: 80, Rank: []int{80}, D: 64, BagPrecision: 0.5, BagRecall: 1, BagMargin: -0.05,
			BagRankRecall: 0.75, BagWorstRank: 9, BagMarginTopK: -0.03, BagTopK: 32, BagRankRecallTopK: 0.5,
			OrderMargin: math.NaN(), Exact: math.NaN(), TokenAcc: math.NaN(), Seconds: 2},
		{Index: 1, Truth: [][]int{{3, 4}}, N: 80, Rank: []int{80}, D: 64, BagPrecision: 1, BagRecall: 0.5, BagMargin: 0.2,
			BagRankRecall: 1, BagWorstRank: 2, BagMarginTopK: 0.1, BagTopK: 32, BagRankRecallTopK: 1,
			OrderMargin: math.NaN(), Exact: math.NaN(), TokenAcc: math.NaN(), Seconds: 3},
	}
	var b bytes.Buffer
	printDecode(&b, res, true)
	out := b.String()
	for _, want := range []string{
		"| 0 | 1 | 80 | 80 of 64 | 0.50 / 1.00 | -0.05 | - |",
		"total: 2 texts in 2 batches: bag only: precision 0.750, recall 0.750, worst bag margin -0.05 decades, ranking recall 0.875 (worst true token ranked 9) (top-k containment: -0.03 decades, k 32, ranking recall 0.750), rank [80] of 64, in 5.0 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
