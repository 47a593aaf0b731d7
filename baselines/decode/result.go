package decode

import (
	"slices"
)

// Text is one decoded text.
type Text struct {
	Tokens []int `json:"tokens"`
	// Excess is the worst step's score over the certification bound, in decades (<= 0: every
	// step certified); Lead the smallest lead of a kept extension over the best one left out.
	Excess  float64 `json:"excess"`
	Lead    float64 `json:"lead"`
	Claimed bool    `json:"claimed"`
	// Open marks a text whose end is not proven: some extension by one more bag token was not
	// refused by the claim's margin, the search stopped reading it (the step cap, the model's
	// context, every extension passing), or the ranking cut it back before a miss. Never claimed.
	Open bool `json:"open,omitempty"`
	// Unproven counts, for a text every other rule would claim, its steps that prove nothing (their
	// rows within the bound of the span of rows already explained, or beside an extension of the
	// same prefix whose were: claim.go); a text with any is not claimed.
	Unproven int `json:"unproven,omitempty"`
	// Match is the true text it equals (-1: none).
	Match int `json:"match"`
	// hist is each step's rows and excesses, for the claim rule.
	hist []step
}

// BatchResult is the outcome of one batch.
type BatchResult struct {
	Index int64 `json:"index"`
	// Truth are the batch's texts (token ids) as the sampler drew them.
	Truth [][]int `json:"truth"`
	// N and NObs are block 0's rows (clean + shields) and observed rows; Rank the numerical rank
	// of each attacked block's U, D the width.
	N    int   `json:"n"`
	NObs int   `json:"n_obs"`
	Rank []int `json:"rank"`
	D    int   `json:"d"`
	// Bag is the certified bag; BagPrecision and BagRecall against the true distinct tokens.
	Bag          []int   `json:"bag"`
	BagPrecision float64 `json:"bag_precision"`
	BagRecall    float64 `json:"bag_recall"`
	// BagMargin is the best wrong token's score minus the worst true token's (decades; > 0: the
	// bag's ranking separates them); OrderMargin the same along the true texts (the best wrong
	// extension of each true prefix, one that continues no true text, against the true next token),
	// the smallest over steps.
	BagMargin   float64 `json:"bag_margin"`
	OrderMargin float64 `json:"order_margin"`
	// BagMarginTopK is, with BagOnly past full rank, the bag's margin by top-k containment (a
	// token row's energy outside U's top k right singular directions, relative to its own) at
	// the k of membership.Space.Ks that separates best, and BagTopK that k; NaN and 0 otherwise.
	BagMarginTopK float64 `json:"bag_margin_topk"`
	BagTopK       int     `json:"bag_topk"`
	// BagRankRecall is the fraction of the true distinct tokens among the vocabulary's m
	// best-scoring tokens, m the number of true distinct tokens, and BagWorstRank the rank
	// (1-based) of the worst-scoring true token: how much of the bag the ranking still reads
	// where the margin is negative (m and the truth used only to score, as every figure here).
	// BagRankRecallTopK is the same by top-k containment at BagTopK (NaN without it).
	BagRankRecall     float64 `json:"bag_rank_recall"`
	BagWorstRank      int     `json:"bag_worst_rank"`
	BagRankRecallTopK float64 `json:"bag_rank_recall_topk"`
	// Decoded are the texts read back; Exact the fraction of true texts among them; TokenAcc the
	// mean over true texts of the best positionwise accuracy of a decoded text.
	Decoded  []Text  `json:"decoded"`
	Exact    float64 `json:"exact"`
	TokenAcc float64 `json:"token_accuracy"`
	// Claims counts claimed texts; ClaimsRight the true texts read by a claim, each true text
	// matched to at most one claimed text equal to it (tally): Claims - ClaimsRight are wrong.
	// Overclaimed says claims were withdrawn because U cannot hold all their rows (claim.go).
	Claims      int  `json:"claims"`
	ClaimsRight int  `json:"claims_right"`
	Overclaimed bool `json:"overclaimed,omitempty"`
	// Forwards is the candidate extensions computed; Seconds the batch's wall time (0: not
	// recorded). An output directory's results.jsonl leaves Seconds out, so that its lines are
	// the same bytes in every run of the batch; timing.jsonl holds them (outdir.go).
	Forwards int     `json:"forwards"`
	Seconds  float64 `json:"seconds,omitempty"`
}

// score sets r's figures against the truth, which the attack itself never sees: each decoded
// text's Match, Exact and TokenAcc.
func (r *BatchResult) score() {
	for i := range r.Decoded {
		r.Decoded[i].Match = -1
		for j, t := range r.Truth {
			if slices.Equal(r.Decoded[i].Tokens, t) {
				r.Decoded[i].Match = j
			}
		}
	}
	exact := 0
	r.TokenAcc = 0
	for _, t := range r.Truth {
		best, found := 0.0, false
		for _, dt := range r.Decoded {
			found = found || slices.Equal(dt.Tokens, t)
			best = max(best, Positionwise(dt.Tokens, t))
		}
		if found {
			exact++
		}
		r.TokenAcc += best / float64(len(r.Truth))
	}
	r.Exact = float64(exact) / float64(len(r.Truth))
}

// Positionwise is the fraction of truth's positions where got holds the same token: a decoded
// text's token accuracy against a true text.
func Positionwise(got, truth []int) float64 {
	same := 0
	for i := range min(len(got), len(truth)) {
		if got[i] == truth[i] {
			same++
		}
	}
	return float64(same) / float64(len(truth))
}
