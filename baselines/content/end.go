package content

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/causallm"
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
	var blocks []*baselines.PreparedRows
	if dec.Verdict == VerdictClaim && void == "" && next != nil {
		var err error
		if blocks, err = prepareNext(next); err != nil {
			return dec, err
		}
	}
	return checkEndPrepared(ms, dec, blocks, next != nil, void)
}

// prepareNext cuts next-token rows (V, d) into blocks of scoreBlockRows rows prepared for the
// residual test.
func prepareNext(next *mat.Dense) ([]*baselines.PreparedRows, error) {
	n, d := next.Dims()
	var out []*baselines.PreparedRows
	for lo := 0; lo < n; lo += scoreBlockRows {
		p, err := baselines.PrepareRows(next.Slice(lo, min(n, lo+scoreBlockRows), 0, d).(*mat.Dense))
		if err != nil {
			return nil, fmt.Errorf("content: end-of-text test: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkEndPrepared is CheckEnd of next-token rows in prepared blocks (prepareNext); have says
// there are rows (none for an empty vocabulary).
func checkEndPrepared(ms *membership.Space, dec Decision, next []*baselines.PreparedRows, have bool, void string) (Decision, error) {
	if dec.Verdict != VerdictClaim {
		return dec, nil
	}
	rep := EndReport{Closest: -1, Void: void}
	if void == "" {
		if !have {
			return dec, errors.New("content: end-of-text test without next-token rows")
		}
		rep.Score, rep.Bound = math.Inf(1), math.Log10(ms.ResidualBound())
		lo := 0
		for _, b := range next {
			frac, _, err := ms.RowSpace().ResidualsPrepared(b)
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
			lo += len(frac)
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
	n, void, err := e.nextRows(ctx, text)
	if n == nil {
		return nil, void, err
	}
	out := mat.NewDense(len(n.x)/e.d, e.d, nil) // (V, d)
	for i, f := range n.x {
		out.RawMatrix().Data[i] = float64(f)
	}
	return out, "", nil
}

// nextRowsOf are a text's next-token rows x (V, d), with their blocks prepared for the residual
// test once they are asked for (prepared).
type nextRowsOf struct {
	x      []float32
	d      int
	blocks []*baselines.PreparedRows
}

// prepared are n's rows in blocks of scoreBlockRows rows prepared for the residual test (as
// prepareNext cuts them), made on first use.
func (n *nextRowsOf) prepared() ([]*baselines.PreparedRows, error) {
	if n.blocks == nil {
		v := len(n.x) / n.d
		for lo := 0; lo < v; lo += scoreBlockRows {
			hi := min(v, lo+scoreBlockRows)
			p, err := baselines.PrepareRows32(n.x[lo*n.d:hi*n.d], hi-lo, n.d)
			if err != nil {
				return nil, fmt.Errorf("content: end-of-text test: %w", err)
			}
			n.blocks = append(n.blocks, p)
		}
	}
	return n.blocks, nil
}

// bytes is the memory n holds: its rows (its prepared blocks share them) and their energies.
func (n *nextRowsOf) bytes() int64 { return 4*int64(len(n.x)) + 8*int64(len(n.x)/n.d) }

// NextKeptBytes bounds the memory of the next-token rows an Embedder keeps (nextRows) unless it
// shares a budget of its own (ShareKeptRows): a grid assessment claims the same victims' secrets
// at every setting below full rank, and a claim's rows past block 0 are its costliest part (V
// rows through the blocks before). 5 GiB is 108 texts of the configs/lm decoder (V 32,000, d 384:
// 49 MB each), the 100 secrets of a default assessment's victims.
const NextKeptBytes = 5 << 30

// KeptRows is a memory budget for kept next-token rows that several Embedders share (one per
// attacked block), so that together they hold at most its bytes. Safe for concurrent use.
type KeptRows struct {
	mu   sync.Mutex
	left int64
}

// NewKeptRows is a budget of bytes (<= 0: nothing is kept).
func NewKeptRows(bytes int64) *KeptRows { return &KeptRows{left: max(bytes, 0)} }

// take reserves n bytes, or reports that fewer are left.
func (k *KeptRows) take(n int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n > k.left {
		return false
	}
	k.left -= n
	return true
}

// ShareKeptRows makes e keep its next-token rows within k, a budget other embedders may share,
// instead of a NextKeptBytes of its own. Call it before the first NextRows.
func (e *Embedder) ShareKeptRows(k *KeptRows) { e.keep = k }

// nextRows is NextRows, kept: the rows depend on the text alone (and the embedder's weights,
// layer and point), so they are computed once per text. At layer 0 a row is its token's embedding
// (normed at the attention input): no prefix reaches it, so they are every text's (e.first), the
// text's own refusals (EndVoid's max_tokens) still checked. Past layer 0 the first texts asked
// for are kept while the embedder's budget lasts (NextKeptBytes, or a shared KeptRows; the rest
// computed each time); what is kept is shared, not to be changed.
func (e *Embedder) nextRows(ctx context.Context, text string) (*nextRowsOf, string, error) {
	dec, ok := e.fwd.(*decoder)
	if !ok {
		return nil, "", errors.New("content: next-token rows of an encoder: only a causal model's text can go on")
	}
	if e.first != nil {
		if _, void, err := dec.nextIDs(text); err != nil || void != "" {
			return nil, void, err
		}
		return e.first, "", nil
	}
	if n, ok := e.nextKept[text]; ok {
		return n, "", nil
	}
	x, void, err := dec.next(ctx, text)
	if err != nil || void != "" {
		return nil, void, err
	}
	if e.fp16 {
		store.RoundFloat16(x)
	}
	n := &nextRowsOf{x: x, d: e.d}
	switch {
	case dec.opt.Layer == 0:
		e.first = n
	default:
		if e.keep == nil {
			e.keep = NewKeptRows(NextKeptBytes)
		}
		if e.keep.take(n.bytes()) {
			if e.nextKept == nil {
				e.nextKept = map[string]*nextRowsOf{}
			}
			e.nextKept[text] = n
		}
	}
	return n, "", nil
}

// nextBatch is how many next tokens one ForwardAlternatives call runs.
const nextBatch = 1024

// errEnough stops a forward pass once the tapped rows are in.
var errEnough = errors.New("content: rows taken")

// nextIDs are text's token ids, or void says why its next-token rows prove nothing.
func (e *decoder) nextIDs(text string) ([]int32, string, error) {
	ids, err := e.tokens(text)
	if err != nil {
		return nil, "", err
	}
	if len(ids) >= e.opt.MaxTokens {
		return nil, fmt.Sprintf("the claimed text has %d tokens, the store's max_tokens: a longer text is cut to the same rows", len(ids)), nil
	}
	return ids, "", nil
}

// next returns the rows (V, d) of text followed by each token id of the tokenizer's vocabulary, at
// the store's layer and point and norm (not rounded); void as NextRows says.
func (e *decoder) next(ctx context.Context, text string) ([]float32, string, error) {
	ids, void, err := e.nextIDs(text)
	if err != nil || void != "" {
		return nil, void, err
	}
	d, v := e.m.Cfg.Hidden, e.tok.VocabSize()
	// Only the store's point is read: on a device the other blocks' rows stay there.
	defer e.dc.TapOnly(causallm.TapPoint{Point: e.opt.Point, Layer: e.opt.Layer})()
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
