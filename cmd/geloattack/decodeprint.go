package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/extraction"
)

// printDecode writes one table row per batch and the totals (decode.Summarize's, with the
// batches' wall times). A batch whose time was not recorded shows "-" for its rate and time.
func printDecode(w io.Writer, res []decode.BatchResult, bagOnly bool) {
	fmt.Fprintln(w, "| batch | texts | n | rank per block of d | bag P / R | bag margin | order margin | exact | token acc | claims (right) | forwards/s | s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	var secs float64
	for _, r := range res {
		rank := make([]string, len(r.Rank))
		for i, k := range r.Rank {
			rank[i] = strconv.Itoa(k)
		}
		order := "-"
		if !math.IsNaN(r.OrderMargin) {
			order = fmt.Sprintf("%.2f", r.OrderMargin)
		}
		rate, took := "-", "-"
		if r.Seconds > 0 {
			rate, took = fmt.Sprintf("%.0f", float64(r.Forwards)/r.Seconds), fmt.Sprintf("%.1f", r.Seconds)
		}
		fmt.Fprintf(w, "| %d | %d | %d | %s of %d | %.2f / %.2f | %.2f | %s | %s | %s | %d (%d) | %s | %s |\n",
			r.Index, len(r.Truth), r.N, strings.Join(rank, ","), r.D, r.BagPrecision, r.BagRecall, r.BagMargin, order,
			measured(r.Exact), measured(r.TokenAcc), r.Claims, r.ClaimsRight, rate, took)
		secs += r.Seconds
	}
	s := decode.Summarize(res, bagOnly)
	if bagOnly && len(res) > 0 {
		topk := ""
		if !math.IsNaN(s.BagMarginTopK) {
			topk = fmt.Sprintf(" (top-k containment: %.2f decades, k %d, ranking recall %.3f)", s.BagMarginTopK, s.BagTopK, s.BagRankRecallTopK)
		}
		fmt.Fprintf(w, "\ntotal: %d texts in %d batches: bag only: precision %.3f, recall %.3f, worst bag margin %.2f decades, ranking recall %.3f (worst true token ranked %d)%s, rank %v of %d, in %.1f s\n",
			s.Texts, s.Batches, s.BagPrecision, s.BagRecall, s.WorstBagMargin, s.BagRankRecall, s.WorstBagRank, topk, s.Rank, s.D, secs)
		return
	}
	fmt.Fprintf(w, "\ntotal: %d texts in %d batches: exact %.3f, token accuracy %.3f, %d claims (%d right), %d candidate forwards in %.1f s (%.0f/s)\n",
		s.Texts, s.Batches, s.Exact, s.TokenAcc, s.Claims, s.ClaimsRight, s.Forwards, secs, float64(s.Forwards)/secs)
}

// textDecoder gives the text of token ids as the tokenizer decodes them (data/bpe).
type textDecoder interface {
	Decode(ids []int) string
	IsSpecial(id int) bool
}

// textsOf is tok's decoder, nil when it has none (the table then shows token ids).
func textsOf(tok extraction.Tokenizer) textDecoder {
	d, _ := tok.(textDecoder)
	return d
}

// printTexts writes, per batch, each true text beside the decoded text closest to it (the best
// positionwise token accuracy, the first of equals), whether a decoded text equals it ("exact")
// and whether a claimed one does; then each claimed text equal to no true text, a wrong claim.
// Texts are the tokenizer's decode of their ids, special tokens (BOS) left out, quoted so that
// spaces and line breaks show; tok nil shows the ids, redact neither.
func printTexts(w io.Writer, res []decode.BatchResult, tok textDecoder, redact bool) {
	show := func(ids []int) string {
		switch {
		case redact:
			return "(redacted)"
		case ids == nil:
			return "-"
		case tok == nil:
			return fmt.Sprint(ids)
		}
		plain := make([]int, 0, len(ids))
		for _, id := range ids {
			if !tok.IsSpecial(id) {
				plain = append(plain, id)
			}
		}
		return strings.ReplaceAll(strconv.Quote(tok.Decode(plain)), "|", `\|`)
	}
	fmt.Fprintln(w, "\n| batch | text | exact | claimed | token acc | true text | decoded text |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range res {
		for j, truth := range r.Truth {
			var closest []int
			best, exact, claimed := -1.0, false, false
			for _, dt := range r.Decoded {
				same := slices.Equal(dt.Tokens, truth)
				exact, claimed = exact || same, claimed || same && dt.Claimed
				if acc := decode.Positionwise(dt.Tokens, truth); acc > best {
					best, closest = acc, dt.Tokens
				}
			}
			ex, cl, acc := yesNo(exact), yesNo(claimed), "-"
			if best >= 0 {
				acc = fmt.Sprintf("%.2f", best)
			}
			if math.IsNaN(r.Exact) {
				ex, cl = "-", "-" // bag only: no order read
			}
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s |\n", r.Index, j, ex, cl, acc, show(truth), show(closest))
		}
		for _, dt := range r.Decoded {
			if dt.Claimed && !slices.ContainsFunc(r.Truth, func(t []int) bool { return slices.Equal(t, dt.Tokens) }) {
				fmt.Fprintf(w, "| %d | - | no | wrong claim | - | - | %s |\n", r.Index, show(dt.Tokens))
			}
		}
	}
}

// yesNo writes a table's boolean.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// measured formats a figure to two decimals, or "-" when it was not measured (NaN: a bag-only
// run reads no order, so it has no exact or token accuracy).
func measured(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}
