package decode

import (
	"cmp"
	"math"
	"slices"
)

// Summary is a run's totals over its batches' results: what decode prints under its table and
// writes to summary.json. It holds no wall time (that is timing.jsonl's), so a resumed or merged
// run's summary is the same bytes as one uninterrupted run's.
type Summary struct {
	// Batches are the batches summarized, Planned the run's (its shard's) batches, Texts their
	// true texts.
	Batches int  `json:"batches"`
	Planned int  `json:"planned_batches"`
	Texts   int  `json:"texts"`
	BagOnly bool `json:"bag_only,omitempty"`
	// Exact is the fraction of the true texts read back exactly and TokenAcc their mean token
	// accuracy, each text weighing the same (NaN with BagOnly).
	Exact    float64 `json:"exact"`
	TokenAcc float64 `json:"token_accuracy"`
	// Claims, ClaimsRight and Forwards are summed over the batches; Overclaimed counts the
	// batches whose claims were withdrawn.
	Claims      int `json:"claims"`
	ClaimsRight int `json:"claims_right"`
	Overclaimed int `json:"overclaimed_batches"`
	Forwards    int `json:"forwards"`
	// BagPrecision, BagRecall and BagRankRecall are means over the batches; WorstBagMargin and
	// WorstBagRank the worst batch's.
	BagPrecision   float64 `json:"bag_precision"`
	BagRecall      float64 `json:"bag_recall"`
	BagRankRecall  float64 `json:"bag_rank_recall"`
	WorstBagMargin float64 `json:"worst_bag_margin"`
	WorstBagRank   int     `json:"worst_bag_rank"`
	// BagMarginTopK is the worst batch's top-k margin and BagRankRecallTopK the mean top-k
	// ranking recall, where the first batch measured them (NaN otherwise); BagTopK its k.
	BagMarginTopK     float64 `json:"bag_margin_topk"`
	BagTopK           int     `json:"bag_topk,omitempty"`
	BagRankRecallTopK float64 `json:"bag_rank_recall_topk"`
	// Rank and D are the first batch's ranks per attacked block and the width.
	Rank []int `json:"rank"`
	D    int   `json:"d"`
}

// Summarize totals res (in any order: the sums and means are taken in index order, so that a
// merged run's summary is bit for bit the unsharded run's); bagOnly is the run's Options.BagOnly.
func Summarize(res []BatchResult, bagOnly bool) Summary {
	s := Summary{Batches: len(res), Planned: len(res), BagOnly: bagOnly, WorstBagMargin: math.Inf(1),
		BagMarginTopK: math.NaN(), BagRankRecallTopK: math.NaN()}
	var exact, acc float64
	n := float64(len(res))
	res = byIndex(res)
	for _, r := range res {
		exact += r.Exact * float64(len(r.Truth))
		acc += r.TokenAcc * float64(len(r.Truth))
		s.Texts += len(r.Truth)
		s.Claims += r.Claims
		s.ClaimsRight += r.ClaimsRight
		s.Forwards += r.Forwards
		if r.Overclaimed {
			s.Overclaimed++
		}
		s.BagPrecision += r.BagPrecision / n
		s.BagRecall += r.BagRecall / n
		s.BagRankRecall += r.BagRankRecall / n
		s.WorstBagMargin = min(s.WorstBagMargin, r.BagMargin)
		s.WorstBagRank = max(s.WorstBagRank, r.BagWorstRank)
	}
	s.Exact, s.TokenAcc = exact/float64(s.Texts), acc/float64(s.Texts)
	if bagOnly {
		s.Exact, s.TokenAcc = math.NaN(), math.NaN()
	}
	if len(res) == 0 {
		return s
	}
	first := res[0]
	s.Rank, s.D = first.Rank, first.D
	if !math.IsNaN(first.BagMarginTopK) {
		s.BagMarginTopK, s.BagTopK, s.BagRankRecallTopK = math.Inf(1), first.BagTopK, 0
		for _, r := range res {
			s.BagMarginTopK = min(s.BagMarginTopK, r.BagMarginTopK)
			s.BagRankRecallTopK += r.BagRankRecallTopK / n
		}
	}
	return s
}

// byIndex is a copy of res ordered by batch index.
func byIndex(res []BatchResult) []BatchResult {
	out := slices.Clone(res)
	slices.SortStableFunc(out, func(a, b BatchResult) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// floatFields are s's figures that may be non-finite.
func (s *Summary) floatFields() []floatField {
	return []floatField{{"exact", &s.Exact}, {"token_accuracy", &s.TokenAcc}, {"worst_bag_margin", &s.WorstBagMargin},
		{"bag_margin_topk", &s.BagMarginTopK}, {"bag_rank_recall_topk", &s.BagRankRecallTopK}}
}

// MarshalJSON writes the non-finite figures (not measured, or nothing to separate) as null, their
// values in "nonfinite", as BatchResult does.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	p := plain(s)
	return marshalFigures(&p, (*Summary)(&p).floatFields())
}
