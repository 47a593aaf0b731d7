package decode

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// With a fifth of U's rows dropped (obs_rows 0.8) the true rows leave rowspace(U_obs): the
// threshold search certifies no token and stops, while the ranking search still reads the bag
// from the scores alone (every distinct token of the batch among its n_obs best, when there are
// at most n_obs). Neither claims anything, since nothing could be certified. The order does not
// come back on this toy: each true row sits as far outside the dropped-row space as the rows of
// bag tokens at wrong positions (both about 10 decades over the bound), so the ranking has
// nothing to go on there (docs/prompt-decoding.md).
func TestToyRankingReadsTheBagPastDroppedRows(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(1)
	cfg.ObsRows = 0.8
	texts := sourceTexts(40, 200, 2)
	for _, rank := range []bool{false, true} {
		res, err := Run(context.Background(), m, texts, Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}, Rank: rank})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			distinct := map[int]bool{}
			for _, tx := range r.Truth {
				for _, v := range tx {
					distinct[v] = true
				}
			}
			t.Logf("rank %v batch %d: n %d obs %d, %d distinct tokens; bag %d (P %.2f R %.2f, margin %.2f) order margin %.2f exact %.2f acc %.2f claims %d",
				rank, r.Index, r.N, r.NObs, len(distinct), len(r.Bag), r.BagPrecision, r.BagRecall, r.BagMargin, r.OrderMargin, r.Exact, r.TokenAcc, r.Claims)
			if r.Claims != 0 {
				t.Errorf("rank %v batch %d: %d claims with rows dropped, want none", rank, r.Index, r.Claims)
			}
			switch {
			case !rank && len(r.Bag) != 0:
				t.Errorf("threshold search certified %d bag tokens with rows dropped", len(r.Bag))
			case rank && r.BagMargin > 0 && len(distinct) <= r.NObs && r.BagRecall != 1:
				t.Errorf("ranking bag recall %.2f although the ranking separates the bag (margin %.2f)", r.BagRecall, r.BagMargin)
			case rank && r.BagMargin <= 0:
				t.Errorf("batch %d: bag margin %.2f: the toy no longer separates the bag by ranking", r.Index, r.BagMargin)
			}
		}
	}
}

// On the fully observed toy of TestToyDecodeRecoversEveryText the ranking search reads every text
// back too, and whatever it claims is right: a text it ended by ranking while certified
// extensions remained is open and never claimed.
func TestToyRankingClaimsOnlyProvenTexts(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	cfg.ObserveDtype = gelo.ObserveBF16
	for _, joint := range []bool{false, true} {
		res, err := Run(context.Background(), m, sourceTexts(40, 200, 2), Options{Sampler: cfg, Split: data.Train, Batches: 3, Blocks: []int{0, 1, 2}, Rank: true, Joint: joint})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Logf("joint %v batch %d: exact %.2f acc %.2f claims %d (%d right) decoded %d", joint, r.Index, r.Exact, r.TokenAcc, r.Claims, r.ClaimsRight, len(r.Decoded))
			if r.Exact != 1 || r.Claims != r.ClaimsRight {
				t.Errorf("joint %v batch %d: exact %.2f, %d claims of which %d right", joint, r.Index, r.Exact, r.Claims, r.ClaimsRight)
			}
			for _, d := range r.Decoded {
				if d.Open && d.Claimed {
					t.Errorf("joint %v batch %d: open text %v claimed", joint, r.Index, d.Tokens)
				}
			}
		}
	}
}

// paddedToy is the toy of width 64 with its batches of 4 texts padded past full rank by 64 weak
// shield rows (scale 0.1): the setting where the leverage ranking still reads the texts.
func paddedToy() (*toy, gelo.Config, [][]int) {
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldRows, cfg.ShieldScale = 64, gelo.Fixed(0.1)
	return newToy(200, 64, 3, 1), cfg, sourceTexts(40, 200, 2)
}

// Past full rank with every row observed, block 0's leverage test is sound (a true token always
// passes), so the ranking search extends prefixes by the certified bag, the same tokens the
// threshold search reads, instead of the n_obs best (here n_obs > the vocabulary's tenth), and
// MaxSteps bounds every decoded text; whatever it claims is right.
func TestToyRankingPastFullRankUsesTheCertifiedBag(t *testing.T) {
	m, cfg, texts := paddedToy()
	opt := Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}}
	thr, err := Run(context.Background(), m, texts, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.Rank, opt.MaxSteps = true, 5
	res, err := Run(context.Background(), m, texts, opt)
	if err != nil {
		t.Fatal(err)
	}
	for b, r := range res {
		t.Logf("batch %d: n %d obs %d, bag %d (P %.2f R %.2f), exact %.2f acc %.2f claims %d (%d right)",
			r.Index, r.N, r.NObs, len(r.Bag), r.BagPrecision, r.BagRecall, r.Exact, r.TokenAcc, r.Claims, r.ClaimsRight)
		if len(thr[b].Bag) == 0 || !slices.Equal(r.Bag, thr[b].Bag) {
			t.Errorf("batch %d: ranking bag %v, certified bag %v", r.Index, r.Bag, thr[b].Bag)
		}
		if r.Claims != r.ClaimsRight {
			t.Errorf("batch %d: %d claims, %d right", r.Index, r.Claims, r.ClaimsRight)
		}
		for _, d := range r.Decoded {
			if len(d.Tokens) > 5 {
				t.Errorf("batch %d: decoded %d tokens with MaxSteps 5: %v", r.Index, len(d.Tokens), d.Tokens)
			}
		}
	}
}

// RankBag keeps the best tokens of the ranking search's bag, in the bag's order: a budget at
// least the bag's size changes nothing (claims included), a smaller one cuts the bag to its
// prefix, decodes from those tokens only and forbids every claim (the true extension of a
// claimed step might have been cut).
func TestToyRankBagCutsTheBagAndForbidsClaims(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	texts := sourceTexts(40, 200, 2)
	opt := Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}, Rank: true}
	whole, err := Run(context.Background(), m, texts, opt)
	if err != nil {
		t.Fatal(err)
	}
	for b, r := range whole {
		if r.Claims == 0 || len(r.Bag) < 4 {
			t.Fatalf("batch %d: %d claims from a bag of %d: the toy no longer claims, nothing to forbid", b, r.Claims, len(r.Bag))
		}
	}
	for _, budget := range []int{len(whole[0].Bag) + len(whole[1].Bag), len(whole[0].Bag) - 2} {
		opt.RankBag = budget
		res, err := Run(context.Background(), m, texts, opt)
		if err != nil {
			t.Fatal(err)
		}
		for b, r := range res {
			w := whole[b]
			cut := budget < len(w.Bag)
			t.Logf("budget %d batch %d: bag %d of %d, exact %.2f acc %.2f claims %d", budget, b, len(r.Bag), len(w.Bag), r.Exact, r.TokenAcc, r.Claims)
			if want := w.Bag[:min(budget, len(w.Bag))]; !slices.Equal(r.Bag, want) {
				t.Errorf("budget %d batch %d: bag %v, want the first %d of %v", budget, b, r.Bag, len(want), w.Bag)
			}
			if !cut && (r.Claims != w.Claims || r.Exact != w.Exact || r.TokenAcc != w.TokenAcc) {
				t.Errorf("budget %d batch %d (no cut): claims %d exact %.2f acc %.2f, uncut %d %.2f %.2f", budget, b, r.Claims, r.Exact, r.TokenAcc, w.Claims, w.Exact, w.TokenAcc)
			}
			if cut && r.Claims != 0 {
				t.Errorf("budget %d batch %d: %d claims from a cut bag", budget, b, r.Claims)
			}
			for _, d := range r.Decoded {
				for _, v := range d.Tokens {
					if !slices.Contains(r.Bag, v) {
						t.Errorf("budget %d batch %d: decoded token %d outside the bag %v", budget, b, v, r.Bag)
					}
				}
			}
		}
	}
}

// OrderTopK ranks extensions by top-k containment (k half the rank here). Padded to full rank
// with weak shields, it reads most of every text back on the toy, and its steps lead by enough
// that some texts are claimed (the leverage ranking claims none of these batches); certification
// still rests on the leverage, so whatever it claims is right. A fraction outside membership's
// grid is refused.
func TestToyOrderByTopK(t *testing.T) {
	m, cfg, texts := paddedToy()
	opt := Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2}, Rank: true, MaxSteps: 8, OrderTopK: 0.5}
	res, err := Run(context.Background(), m, texts, opt)
	if err != nil {
		t.Fatal(err)
	}
	claims := 0
	for _, r := range res {
		claims += r.Claims
		t.Logf("batch %d: rank %v, bag %d, exact %.2f acc %.2f claims %d (%d right)", r.Index, r.Rank, len(r.Bag), r.Exact, r.TokenAcc, r.Claims, r.ClaimsRight)
		if r.Rank[1] < 64 {
			t.Fatalf("batch %d: block 1 rank %d of 64: not past full rank", r.Index, r.Rank[1])
		}
		if r.TokenAcc < 0.5 || r.Claims != r.ClaimsRight {
			t.Errorf("batch %d: token accuracy %.2f, %d claims of which %d right", r.Index, r.TokenAcc, r.Claims, r.ClaimsRight)
		}
	}
	if claims == 0 {
		t.Errorf("no claim: the top-k ranking no longer leads its steps as on this toy")
	}
	opt.OrderTopK = 0.3
	if _, err := Run(context.Background(), m, texts, opt); err == nil || !strings.Contains(err.Error(), "0.3") {
		t.Errorf("fraction 0.3 off the grid: err %v", err)
	}
}

// A batch's cut bag does not carry over: after a batch whose bag RankBag cut, a batch whose
// certified bag fits the budget keeps that bag whole, and its claims (the cut once leaked into the
// next batch's choice, which fell back to the n_obs best-ranked tokens).
func TestToyRankBagCutIsPerBatch(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	opt := Options{Sampler: cfg, Split: data.Train, Batches: 3, Blocks: []int{0, 1, 2}, Rank: true, NoOrderMargin: true}
	whole, err := Run(context.Background(), m, sourceTexts(40, 200, 2), opt)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 24
	if len(whole[1].Bag) <= budget || len(whole[2].Bag) > budget || whole[2].Claims == 0 {
		t.Fatalf("bags of %d, %d tokens, %d claims in the last: the toy no longer has a cut batch before one that fits", len(whole[1].Bag), len(whole[2].Bag), whole[2].Claims)
	}
	opt.RankBag = budget
	res, err := Run(context.Background(), m, sourceTexts(40, 200, 2), opt)
	if err != nil {
		t.Fatal(err)
	}
	if r, w := res[2], whole[2]; !slices.Equal(r.Bag, w.Bag) || r.Claims != w.Claims {
		t.Errorf("after a cut batch: bag %v with %d claims, want the certified bag %v with %d", r.Bag, r.Claims, w.Bag, w.Claims)
	}
}
