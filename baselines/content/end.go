package content

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/llama"
)

// The end-of-text test of a decoder's claim. A causal model's rows of a text are the first rows
// of every text that goes on after it: if the victim was "no no no no no no" (the template
// "no no {x} no no" filled with "no no"), the rows of "no no no no no" (filled with "no") are
// rows of the victim bit for bit, suffix rows included, so the candidate "no" passes the residual
// test, and no edit-one neighbour of it is the secret. What tells "the text ends here" from "the
// text goes on" is the row after it: the victim's row at that position is the row of the claimed
// text followed by some next token v, whichever the longer secret is, so if no v's row passes the
// residual test, no text that goes on after the claimed one was the victim. Every v of the
// tokenizer's vocabulary is tried (llama.ForwardAlternatives: one batch through the blocks up to
// the store's). The test holds only where that row is observed: every row observed, contiguous
// windows, and a window longer than the claimed text.

// EndReport is what the end-of-text test of a decoder's claim found.
type EndReport struct {
	// Tested is how many next tokens were tried (the tokenizer's vocabulary); Passing how many of
	// their rows passed the residual test, any of which withdraws the claim.
	Tested  int `json:"tested"`
	Passing int `json:"passing"`
	// Closest is the next token id whose row scored best and Score its score (log10 outside
	// fraction); Bound is log10 of the residual bound they were tested against.
	Closest int     `json:"closest"`
	Score   float64 `json:"score"`
	Bound   float64 `json:"bound"`
	// Void says why the row after the claimed text need not be observed, so that the test proves
	// nothing and the claim is withdrawn; empty when the test ran.
	Void string `json:"void,omitempty"`
}

// EndVoid says why the sampler cfg may leave the row after a claimed text of rows rows out of
// U_obs (empty: it cannot): rows dropped at random (obs_rows < 1), rows sampled at random instead
// of in windows, or a window that can be as short as the text (the victim's window, at a random
// offset, then need not reach past it).
func EndVoid(cfg gelo.Config, rows int) string {
	switch {
	case cfg.ObsRows < 1:
		return fmt.Sprintf("obs_rows %g: the row after the claimed text may be one of the rows not observed", cfg.ObsRows)
	case cfg.TokenSampling != gelo.TokenWindow:
		return fmt.Sprintf("token_sampling %s: the row after the claimed text may be one of the rows not sampled", cfg.TokenSampling)
	case rows >= int(cfg.TokensPerText.Min):
		return fmt.Sprintf("the claimed text has %d rows and tokens_per_text can be %d: the victim's window need not reach the row after it", rows, int(cfg.TokensPerText.Min))
	}
	return ""
}

// CheckEnd tests a decoder's claim against the texts that go on after the claimed one: next holds
// the rows (V, d) of the claimed text followed by each next token, made as the candidates' rows
// were (NextRows), and void is EndVoid's reason why the test proves nothing (empty: it does). A
// claim stands only if every next token's row fails the residual test (beyond ms.ResidualBound());
// if one passes, or the test is void, the verdict becomes VerdictRanked (EndWithdrawn). A decision
// that is not a claim is returned as it is.
func CheckEnd(ms *membership.Space, dec Decision, next *mat.Dense, void string) (Decision, error) {
	if dec.Verdict != VerdictClaim {
		return dec, nil
	}
	rep := EndReport{Closest: -1, Void: void}
	if void == "" {
		if next == nil {
			return dec, errors.New("content: end-of-text test without next-token rows")
		}
		n, _ := next.Dims()
		rep.Score, rep.Bound = math.Inf(1), math.Log10(ms.ResidualBound())
		for lo := 0; lo < n; lo += scoreBlockRows {
			hi := min(n, lo+scoreBlockRows)
			frac, _, err := ms.RowSpace().Residuals(next.Slice(lo, hi, 0, next.RawMatrix().Cols).(*mat.Dense))
			if err != nil {
				return dec, fmt.Errorf("content: end-of-text test: %w", err)
			}
			for j, f := range frac {
				s := math.Log10(max(f, floorFrac))
				rep.Tested++
				if s <= rep.Bound {
					rep.Passing++
				}
				if s < rep.Score {
					rep.Score, rep.Closest = s, lo+j
				}
			}
		}
		if math.IsInf(rep.Score, 1) {
			rep.Score = 0 // no token: keep the JSON finite
		}
	}
	dec.End = &rep
	if void != "" || rep.Passing > 0 {
		dec.Verdict, dec.EndWithdrawn = VerdictRanked, true
	}
	return dec, nil
}

// NextRows returns the rows (V, d) of text followed by each next token id 0..V-1 of the
// tokenizer's vocabulary, at the store's layer and point, normalised and rounded as Embed's rows
// are; void says why no such row can tell text from a longer one (text fills the store's
// max_tokens, so a longer one is cut to the same rows), and then rows is nil. Only a decoder has
// them.
func (e *Embedder) NextRows(ctx context.Context, text string) (rows *mat.Dense, void string, err error) {
	dec, ok := e.fwd.(*decoder)
	if !ok {
		return nil, "", errors.New("content: next-token rows of an encoder: only a causal model's text can go on")
	}
	x, void, err := dec.next(ctx, text)
	if err != nil || void != "" {
		return nil, void, err
	}
	if e.fp16 {
		store.RoundFloat16(x)
	}
	v := len(x) / e.d
	out := mat.NewDense(v, e.d, nil) // (V, d)
	for i, f := range x {
		out.RawMatrix().Data[i] = float64(f)
	}
	return out, "", nil
}

// nextBatch is how many next tokens one ForwardAlternatives call runs.
const nextBatch = 1024

// errEnough stops a forward pass once the tapped rows are in.
var errEnough = errors.New("content: rows taken")

// next returns the rows (V, d) of text followed by each token id of the tokenizer's vocabulary, at
// the store's layer and point and norm (not rounded); void as NextRows says.
func (e *decoder) next(ctx context.Context, text string) ([]float32, string, error) {
	ids, err := e.tokens(text)
	if err != nil {
		return nil, "", err
	}
	if len(ids) >= e.opt.MaxTokens {
		return nil, fmt.Sprintf("the claimed text has %d tokens, the store's max_tokens: a longer text is cut to the same rows", len(ids)), nil
	}
	d, v := e.m.Cfg.Hidden, e.tok.VocabSize()
	cache, err := e.dc.NewCache(len(ids) + 1)
	if err != nil {
		return nil, "", fmt.Errorf("content: next-token rows: %w", err)
	}
	if err := e.dc.ForwardNext(ctx, cache, ids, nil, nil); err != nil {
		return nil, "", fmt.Errorf("content: next-token rows of %q: %w", text, err)
	}
	out := make([]float32, v*d) // (V, d)
	alts := make([]int32, 0, nextBatch)
	for lo := 0; lo < v; lo += nextBatch {
		hi := min(v, lo+nextBatch)
		alts = alts[:0]
		for id := lo; id < hi; id++ {
			alts = append(alts, int32(id))
		}
		err := e.dc.ForwardAlternatives(ctx, cache, alts, func(p llama.Point, layer int, x []float32) error {
			if p != e.opt.Point || layer != e.opt.Layer {
				return nil
			}
			copy(out[lo*d:hi*d], x[:(hi-lo)*d])
			return errEnough
		})
		if err != nil && !errors.Is(err, errEnough) {
			return nil, "", fmt.Errorf("content: next-token rows of %q: %w", text, err)
		}
	}
	if e.opt.Norm == extraction.NormRMS {
		extraction.RMSNormalize(out, d)
	}
	return out, "", nil
}
