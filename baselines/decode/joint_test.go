package decode

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// Joint sums the blocks' excesses: each attacked block's U is a separate observation of the same
// prefix, so on the toy of TestToyDecodeRecoversEveryText (blocks 1 and 2 score the order) a true
// step leads its best wrong extension by about twice the decades jointly that it leads by the
// worst block (docs/prompt-decoding.md: 2.6 and 5.0). A claim lead of 3 decades lies between: by
// the worst block no text's end leads "one more token" by it (every text open, nothing claimed),
// jointly every text is claimed, by either search. Certification does not depend on Joint, so the
// same texts are decoded both ways.
func TestJointScoringAddsTheBlocksEvidence(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	cfg.ShieldFrac, cfg.ShieldScale = gelo.Fixed(0.05), gelo.Fixed(10)
	cfg.ObserveDtype = gelo.ObserveBF16
	const lead = 3
	texts := sourceTexts(40, 200, 2)
	for _, rank := range []bool{false, true} {
		var runs [2][]BatchResult // worst block, joint
		for i, joint := range []bool{false, true} {
			res, err := Run(context.Background(), m, texts, Options{Sampler: cfg, Split: data.Train, Batches: 2, Blocks: []int{0, 1, 2},
				ClaimLead: lead, Rank: rank, Joint: joint})
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = res
		}
		for b := range runs[0] {
			worst, joint := runs[0][b], runs[1][b]
			what := fmt.Sprintf("rank %v batch %d", rank, b)
			t.Logf("%s: order margin %.2f by the worst block, %.2f jointly; claims %d and %d", what, worst.OrderMargin, joint.OrderMargin, worst.Claims, joint.Claims)
			if w, j := decodedTexts(worst), decodedTexts(joint); !slices.EqualFunc(w, j, slices.Equal) || worst.Exact != 1 {
				t.Errorf("%s: decoded %v by the worst block (exact %.2f), %v jointly: want the same true texts", what, w, worst.Exact, j)
			}
			if joint.OrderMargin < worst.OrderMargin+2 {
				t.Errorf("%s: order margin %.2f jointly, %.2f by the worst block: want 2 decades more from the second block", what, joint.OrderMargin, worst.OrderMargin)
			}
			if worst.Claims != 0 {
				t.Errorf("%s: %d claims by the worst block with a lead of %d decades, want none", what, worst.Claims, lead)
			}
			for _, d := range worst.Decoded {
				if !d.Open || d.Lead >= lead {
					t.Errorf("%s: %v by the worst block: open %v, lead %.2f; want open, its steps leading by less than %d", what, d.Tokens, d.Open, d.Lead, lead)
				}
			}
			if joint.Claims != len(joint.Truth) || joint.ClaimsRight != joint.Claims {
				t.Errorf("%s: %d claims jointly (%d right) of %d texts, want every text", what, joint.Claims, joint.ClaimsRight, len(joint.Truth))
			}
		}
	}
}

// decodedTexts are r's decoded texts, sorted: the searches' order of finishing aside.
func decodedTexts(r BatchResult) [][]int {
	var out [][]int
	for _, d := range r.Decoded {
		out = append(out, d.Tokens)
	}
	sortTexts(out)
	return out
}
