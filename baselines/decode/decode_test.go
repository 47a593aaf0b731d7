package decode

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// sourceTexts draws n texts of 4..8 tokens from a vocabulary of v.
func sourceTexts(n, v int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 5))
	out := make([][]int, n)
	for i := range out {
		t := make([]int, 4+rng.IntN(5))
		for j := range t {
			t[j] = rng.IntN(v)
		}
		out[i] = t
	}
	return out
}

// 4 texts in bf16 with 5% shields at scale 10 (below full rank): every text read back exactly and
// claimed, nothing else claimed.
func TestToyDecodeRecoversEveryText(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	cfg.ObserveDtype = gelo.ObserveBF16
	for _, joint := range []bool{false, true} {
		res, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 3, Blocks: []int{0, 1, 2}, Joint: joint})
		if err != nil {
			t.Fatal(err)
		}
		checkAllClaimed(t, res)
	}
}

// -no-order-margin skips only the evaluation's passes along the true texts: the same texts are
// decoded and claimed, with fewer candidate passes, and the order margin is NaN.
func TestToyDecodeWithoutOrderMargin(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	var runs [2][]BatchResult
	for i, skip := range []bool{false, true} {
		res, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}, NoOrderMargin: skip})
		if err != nil {
			t.Fatal(err)
		}
		checkAllClaimed(t, res)
		runs[i] = res
	}
	for b := range runs[0] {
		with, without := runs[0][b], runs[1][b]
		if math.IsNaN(with.OrderMargin) || !math.IsNaN(without.OrderMargin) {
			t.Errorf("batch %d: order margin %v measured, %v skipped: want a number, then NaN", b, with.OrderMargin, without.OrderMargin)
		}
		if without.Forwards >= with.Forwards {
			t.Errorf("batch %d: %d candidate passes without the order margin, %d with", b, without.Forwards, with.Forwards)
		}
		for i := range with.Decoded {
			if !slices.Equal(with.Decoded[i].Tokens, without.Decoded[i].Tokens) || with.Decoded[i].Claimed != without.Decoded[i].Claimed {
				t.Errorf("batch %d text %d: decoded %v (claimed %v) with the margin, %v (claimed %v) without", b, i,
					with.Decoded[i].Tokens, with.Decoded[i].Claimed, without.Decoded[i].Tokens, without.Decoded[i].Claimed)
			}
		}
	}
}

// -bag-only reads the same bag as the whole attack and stops: no candidate passes, nothing
// decoded or claimed, exact and token accuracy NaN; it needs block 0 alone.
func TestToyBagOnly(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	full, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	bag, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0}, BagOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for b := range full {
		f, o := full[b], bag[b]
		if !slices.Equal(f.Bag, o.Bag) || f.BagPrecision != o.BagPrecision || f.BagRecall != o.BagRecall || f.BagMargin != o.BagMargin {
			t.Errorf("batch %d: bag %v (P %v R %v margin %v) alone, %v (P %v R %v margin %v) in the whole attack", b,
				o.Bag, o.BagPrecision, o.BagRecall, o.BagMargin, f.Bag, f.BagPrecision, f.BagRecall, f.BagMargin)
		}
		if o.BagMargin > 0 && (o.BagRankRecall != 1 || o.BagWorstRank != distinctTokens(o.Truth)) {
			t.Errorf("batch %d: bag separated by %.2f decades but ranking recall %v, worst true token ranked %d of %d",
				b, o.BagMargin, o.BagRankRecall, o.BagWorstRank, distinctTokens(o.Truth))
		}
		if !math.IsNaN(o.BagMarginTopK) { // below full rank: no top-k margin
			t.Errorf("batch %d bag only below full rank: top-k margin %v, want NaN", b, o.BagMarginTopK)
		}
		if o.BagRecall != 1 || o.Forwards != 0 || len(o.Decoded) != 0 || o.Claims != 0 || !math.IsNaN(o.Exact) || !math.IsNaN(o.TokenAcc) {
			t.Errorf("batch %d bag only: recall %v, %d forwards, %d decoded, %d claims, exact %v, token accuracy %v",
				b, o.BagRecall, o.Forwards, len(o.Decoded), o.Claims, o.Exact, o.TokenAcc)
		}
	}
	// Past full rank (64 weak shield rows on width 64) the top-k containment margin is measured too.
	cfg.ShieldRows, cfg.ShieldScale = 64, gelo.Fixed(0.1)
	past, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 1, Blocks: []int{0}, BagOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := past[0]; math.IsNaN(r.BagMarginTopK) || r.BagTopK < 1 || r.BagTopK > 64 {
		t.Errorf("bag only past full rank: top-k margin %v at k %d, want a margin at some k in [1, 64]", r.BagMarginTopK, r.BagTopK)
	} else {
		t.Logf("past full rank: leverage margin %.2f, top-k margin %.2f at k %d, ranking recall %.2f / %.2f", r.BagMargin, r.BagMarginTopK, r.BagTopK, r.BagRankRecall, r.BagRankRecallTopK)
	}
	if r := past[0]; r.BagMarginTopK > 0 && r.BagRankRecallTopK != 1 {
		t.Errorf("past full rank: top-k separates the bag by %.2f decades but its ranking recall is %v", r.BagMarginTopK, r.BagRankRecallTopK)
	}
	if _, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 1, Blocks: []int{1}, BagOnly: true}); err == nil {
		t.Error("bag only without block 0: no error")
	}
}

// checkAllClaimed fails unless every batch's texts were all read back exactly and claimed, and
// nothing else was claimed.
func checkAllClaimed(t *testing.T, res []BatchResult) {
	t.Helper()
	for _, r := range res {
		t.Logf("batch %d: n %d rank %v bag %d (P %.2f R %.2f, margin %.2f) order margin %.2f exact %.2f acc %.2f claims %d/%d decoded %d",
			r.Index, r.N, r.Rank, len(r.Bag), r.BagPrecision, r.BagRecall, r.BagMargin, r.OrderMargin, r.Exact, r.TokenAcc, r.ClaimsRight, r.Claims, len(r.Decoded))
		if r.Exact != 1 || r.ClaimsRight != len(r.Truth) || r.Claims != r.ClaimsRight {
			t.Errorf("batch %d: exact %.2f, claims %d (right %d) of %d texts", r.Index, r.Exact, r.Claims, r.ClaimsRight, len(r.Truth))
		}
	}
}

// Each generation step is one row plus shields: every token read back and claimed, in bf16, with
// shields at scale 10.
func TestToyGenerationReadsEveryToken(t *testing.T) {
	m := newToy(200, 64, 2, 1)
	cfg := gelo.DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.ShieldRows, cfg.ShieldScale = 3, gelo.Fixed(10)
	cfg.ObserveDtype = gelo.ObserveBF16
	r, err := Generation(context.Background(), m, sourceTexts(40, 200, 2), nil, cfg, data.Train, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Correct != r.Steps || r.ClaimsRight != r.Steps || r.Claims != r.ClaimsRight {
		t.Fatalf("generation: %d of %d steps right, %d claims (%d right)", r.Correct, r.Steps, r.Claims, r.ClaimsRight)
	}
}

// Past full rank (64 shield rows on width 64): weak shields still rank every text back (leverage),
// strong ones stop it; in neither case is anything claimed wrongly.
func TestToyDecodePastFullRankClaimsNothingWrong(t *testing.T) {
	checkPastFullRank(t, newToy(200, 64, 3, 1), sourceTexts(40, 200, 2))
}

// checkPastFullRank decodes 2 batches of 4 texts padded to full rank (64 shield rows; m has width
// 64) at shield scales 0.1 and 10: every text ranked back at 0.1, no claim at 10, no wrong claim.
func checkPastFullRank(t *testing.T, m Model, texts [][]int) {
	t.Helper()
	for _, scale := range []float64{0.1, 10} {
		cfg := gelo.DefaultConfig()
		cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
		cfg.ShieldRows, cfg.ShieldScale = 64, gelo.Fixed(scale)
		res, err := Run(context.Background(), m, texts, Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Logf("scale %g batch %d: n %d rank %v bag %d (P %.2f R %.2f, margin %.2f) order margin %.2f exact %.2f acc %.2f claims %d/%d",
				scale, r.Index, r.N, r.Rank, len(r.Bag), r.BagPrecision, r.BagRecall, r.BagMargin, r.OrderMargin, r.Exact, r.TokenAcc, r.ClaimsRight, r.Claims)
			if r.Claims != r.ClaimsRight || (scale == 10 && r.Claims > 0) {
				t.Errorf("scale %g batch %d: %d claims, %d right", scale, r.Index, r.Claims, r.ClaimsRight)
			}
			if scale == 0.1 && r.Exact != 1 {
				t.Errorf("weak shields past full rank: exact %.2f, want every text ranked back by leverage", r.Exact)
			}
		}
	}
}

// distinctTokens counts the distinct tokens of texts.
func distinctTokens(texts [][]int) int {
	set := map[int]bool{}
	for _, t := range texts {
		for _, v := range t {
			set[v] = true
		}
	}
	return len(set)
}

// rankRecall counts the set's members among the len(set) lowest scores, known answers.
func TestRankRecall(t *testing.T) {
	scores := []float64{0.5, -3, 2, -1, 7, -2}
	for _, c := range []struct {
		set   []int
		rec   float64
		worst int
	}{
		{[]int{1, 5, 3}, 1, 3},      // the three lowest: all in
		{[]int{1, 0}, 0.5, 4},       // 0 ranks 4th, outside the top 2
		{[]int{4}, 0, 6},            // the highest score
		{[]int{2, 4, 0, 3}, 0.5, 6}, // top 4 are 1,5,3,0: two of the set
	} {
		set := map[int]bool{}
		for _, v := range c.set {
			set[v] = true
		}
		if rec, worst := rankRecall(scores, set); rec != c.rec || worst != c.worst {
			t.Errorf("set %v: recall %v, worst rank %d; want %v, %d", c.set, rec, worst, c.rec, c.worst)
		}
	}
}

// Results with infinite scores (a one-step text leads nothing) encode as JSON, the infinities as
// null, every finite field kept.
func TestResultJSONHoldsInfinities(t *testing.T) {
	r := BatchResult{Index: 3, BagMargin: math.Inf(1), OrderMargin: 0.5,
		Decoded: []Text{{Tokens: []int{1, 2}, Excess: -2, Lead: math.Inf(-1), Match: 0}}}
	b, err := json.Marshal([]BatchResult{r})
	if err != nil {
		t.Fatal(err)
	}
	r2 := BatchResult{Index: 4, BagMargin: 1, OrderMargin: math.NaN(), BagMarginTopK: math.NaN(), BagRankRecallTopK: math.NaN(), Exact: math.NaN(), TokenAcc: math.NaN()}
	b2, err := json.Marshal(r2) // a bag-only result: the unmeasured figures are NaN
	if err != nil {
		t.Fatalf("bag-only result: %v", err)
	}
	for _, want := range []string{`"order_margin":null`, `"bag_margin_topk":null`, `"bag_rank_recall_topk":null`, `"exact":null`, `"token_accuracy":null`, `"bag_margin":1`} {
		if !strings.Contains(string(b2), want) {
			t.Errorf("bag-only JSON lacks %s: %s", want, b2)
		}
	}
	for _, want := range []string{`"bag_margin":null`, `"order_margin":0.5`, `"lead":null`, `"excess":-2`, `"index":3`, `"tokens":[1,2]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

// Progress hears each stage of every batch: each attacked block's space, the bag, and each
// step of the search, prefixed with the batch.
func TestProgressLines(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	var lines []string
	res, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1},
		Progress: func(s string) { lines = append(lines, s) }})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lines, "\n")
	for b := range res {
		for _, want := range []string{"block 0: U ", "block 1: U ", "bag: ", "step 1 of at most"} {
			if !strings.Contains(all, fmt.Sprintf("batch %d (", b)) || !containsLine(lines, fmt.Sprintf("batch %d (", b), want) {
				t.Errorf("batch %d: no progress line with %q:\n%s", b, want, all)
			}
		}
	}
}

// containsLine says some line holds both prefix and part.
func containsLine(lines []string, prefix, part string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) && strings.Contains(l, part) })
}
