package decode

import (
	"context"
	"fmt"
	"time"

	"github.com/gelo-research/geloattack/engine/blas"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// GenerationResult is the generation-step attack's outcome: each decoding step offloads the new
// token's row of block 0 plus shields, and the attacker tests every vocabulary row against it.
type GenerationResult struct {
	// Steps observed; Correct the steps whose best-scored token is the generated one; Claims and
	// ClaimsRight the steps where the attack claimed (best certified, leading the second by
	// ClaimLead decades, an absolute test available) and how many of those were right.
	Steps       int     `json:"steps"`
	Correct     int     `json:"correct"`
	Claims      int     `json:"claims"`
	ClaimsRight int     `json:"claims_right"`
	N           float64 `json:"n_mean"`
	Seconds     float64 `json:"seconds"`
}

// Generation observes steps generation steps drawn from texts: each step one token's block-0 row
// (a row of a text, as the sampler draws it: positives 1, tokens_per_text 1) mixed with the
// config's shields. textIDs are the texts' ids for the split (nil: 0, 1, ...), as Options.TextIDs.
// Its BLAS calls run single-threaded, as Run's do.
func Generation(ctx context.Context, m Model, texts [][]int, textIDs []int64, cfg gelo.Config, split data.Split, steps int, claimLead float64) (res *GenerationResult, err error) {
	blas.Default().Serial(func() { res, err = generation(ctx, m, texts, textIDs, cfg, split, steps, claimLead) })
	return res, err
}

func generation(ctx context.Context, m Model, texts [][]int, textIDs []int64, cfg gelo.Config, split data.Split, steps int, claimLead float64) (*GenerationResult, error) {
	if textIDs != nil && len(textIDs) != len(texts) {
		return nil, fmt.Errorf("decode: %d text ids for %d texts", len(textIDs), len(texts))
	}
	if steps < 1 {
		return nil, fmt.Errorf("decode generation: steps %d, want >= 1", steps)
	}
	if claimLead == 0 {
		claimLead = 1
	}
	u, err := membership.UnitRoundoff(string(cfg.ObserveDtype))
	if err != nil {
		return nil, err
	}
	d := m.D()
	corpus := data.NewMemCorpus(d, 1)
	for i, toks := range texts {
		rows, err := m.Rows(toks, 1)
		if err != nil {
			return nil, fmt.Errorf("decode generation: text %d: %w", i, err)
		}
		id := int64(i)
		if textIDs != nil {
			id = textIDs[i]
		}
		if err := corpus.Add(id, rows[0], []float32{0}); err != nil {
			return nil, fmt.Errorf("decode generation: text %d: %w", i, err)
		}
	}
	cfg.Positives, cfg.TokensPerText, cfg.TokenSampling, cfg.Call = gelo.Fixed(1), gelo.Fixed(1), gelo.TokenRandom, 1
	s, err := gelo.NewSampler(corpus, cfg)
	if err != nil {
		return nil, fmt.Errorf("decode generation: %w", err)
	}
	start := time.Now()
	res := &GenerationResult{Steps: steps}
	ws := new(gelo.Workspace)
	// The generated row is block 0's, recomputed by the attacker from the vocabulary: an fp32
	// deployer's recomputation error through no block.
	rho, err := RecomputeBounds(Options{}, []int{0}, d)
	if err != nil {
		return nil, err
	}
	a := &attack{m: m, d: d, blocks: []int{0}, upto: 1, u: u, rho: rho, allObserved: cfg.ObsRows == 1}
	for i := 0; i < steps; i++ {
		ex, err := s.ExampleWith(ws, split, int64(i))
		if err != nil {
			return nil, fmt.Errorf("decode generation: step %d: %w", i, err)
		}
		res.N += float64(ex.N) / float64(steps)
		sp, err := a.space(ex, 0)
		if err != nil {
			return nil, fmt.Errorf("decode generation: step %d: %w", i, err)
		}
		a.spaces = map[int]*membership.Space{0: sp}
		scores, _, err := a.bagScores(ctx, false)
		if err != nil {
			return nil, err
		}
		best, lead := membership.Lead(scores)
		truth := texts[ex.PositiveIdx[0]][ex.HPos[0]]
		if best == truth {
			res.Correct++
		}
		if scores[best] <= 0 && lead >= claimLead && a.certifiable() {
			res.Claims++
			if best == truth {
				res.ClaimsRight++
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
