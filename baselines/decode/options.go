package decode

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// Options configures Run. Its modes resolve into types (newAttack): Rank picks the order search
// and the bag it extends prefixes by (orderSearch; RankBag is its budget), OrderTopK then Joint
// the score that ranks extensions (scoring), BagOnly stops after the bag. Their combinations are
// checked in one place (check): one Run cannot honour is an error, never silently dropped.
type Options struct {
	// Sampler is the deployer's GELO setting (shields, kappa, observed rows, dtype) and how texts
	// are drawn into a batch (Positives = texts per batch, Seed, ValFrac). Run sets
	// TokensPerText to the longest text, with window sampling: every text enters whole.
	Sampler gelo.Config
	// Split the batches' texts come from; Batches how many batches (each index its own example).
	Split   data.Split
	Batches int
	// Blocks are the blocks whose U the attacker sees and scores: 0 gives the bag, the others
	// the order (at least one >= 1). Empty: 0 and 1.
	Blocks []int
	// Beam bounds the live prefixes (0: 4 per text); Branch keeps, per prefix, the certified
	// extensions within this many decades of its best one (0: 1).
	Beam   int
	Branch float64
	// ClaimLead is the lead in decades, over the best extension left out, that every step of a
	// claimed text needs (0: 1).
	ClaimLead float64
	// Joint ranks the extensions of a prefix, and measures a claim's lead, by the sum over the
	// attacked blocks >= 1 of their excesses (each block's U is a separate observation of the
	// same prefix) instead of the worst block's; certification is unchanged (every block's
	// excess <= 0), so a wrong extension is still refused by any one block.
	Joint bool
	// TextIDs are the texts' ids (data.SplitOf splits by them with the sampler's ValFrac), one per
	// text; nil numbers them 0, 1, ... Give the source's ids to keep a trained decoder's held-out
	// texts on the val side.
	TextIDs []int64
	// Rank searches by ranking alone (rankSearch) instead of certification: for rows dropped
	// (obs_rows < 1) and margins that rounding leaves thin. Its bag is the certified bag where
	// block 0's test is sound (every row observed) and certifies something: a true token always
	// passes it, so nothing true is lost and the search is not swamped (past full rank at
	// d = 4096 the n_obs best would be thousands of tokens); otherwise the n_obs best-scoring
	// vocabulary tokens. The claim rule is unchanged, so a text is claimed only when every step
	// of it was certified after all.
	Rank bool
	// RankBag, when > 0, keeps only the RankBag best tokens of the ranking search's bag (it needs
	// Rank): the attacker's budget where the bag is certified but loose or ranked only (past full
	// rank at d = 4096 the certified bag held ~4,200 tokens, each a candidate pass per live prefix
	// and step, while every true token ranked among the first 70 to 330). A true token cut off is
	// lost to the order, so a cut bag forbids claims: a wrong text might lead only because the
	// true extension was not tried.
	RankBag int
	// OrderTopK, when > 0, ranks extensions (as Joint does, summed over the attacked blocks >= 1)
	// by top-k containment instead of the excess, k = OrderTopK x the block's rank, a fraction of
	// membership's grid (0.25, 0.375, ..., 0.9375): the other score past full rank, tried before
	// the order is called defended there. Certification and claims still rest on the excess.
	// It takes precedence over Joint, which it implies.
	OrderTopK float64
	// Skip, when set, leaves out the batches it is true for (another shard's, or those a resumed
	// run has already): the others give the results they give in a run of every batch.
	Skip func(batch int64) bool
	// OnBatch, when set, hears each batch's result as it finishes, before the next starts (an
	// output directory appends it there); an error from it stops Run.
	OnBatch func(BatchResult) error
	// Progress, when set, receives a line at each stage of a batch (each block's space, the bag,
	// each search step): a batch at d = 4096 takes minutes.
	Progress func(string)
	// MaxSteps bounds the length of a decoded text (0: n_obs, or the model's context if less):
	// an attacker's assumption on prompt length, for searches that certify nothing past full
	// rank and would otherwise run on to the model's context.
	MaxSteps int
	// NoOrderMargin skips measuring OrderMargin (NaN then): its passes along the true texts,
	// which only an evaluation knowing the truth runs, are about half a run's candidate passes.
	NoOrderMargin bool
	// BagOnly reads the bag (block 0) and stops: no order search and no candidate passes, for
	// settings where the search would take hours (full rank at d = 4096). Exact and TokenAcc are
	// NaN, nothing is decoded or claimed, and only block 0 is needed. The bag is still the one
	// Rank and RankBag pick; the search's other settings have nothing to act on.
	BagOnly bool
	// DeployerPrecision is the deployer's declared compute precision (fptol's fp32, bf16 or fp16;
	// "": fp32). The deployer's rows are never bit-equal to the attacker's recomputation (another
	// stack, kernel or batch, or the attacker's KV-cache steps against the deployer's whole
	// texts), so every absolute test allows rho = fptol.Recompute(precision, l, d) at block l.
	DeployerPrecision string
	// Recompute, when > 0, is rho at every attacked block instead: the attacker's own bound on
	// the relative distance between its rows and the deployer's. It must be below 1.
	Recompute float64
	// Deployer, when set, supplies the rows the deployer mixed (computed by another stack, e.g.
	// bench/torch_deploy.py); nil: the model's own forward computes them. The attacker's
	// candidate rows always come from the model.
	Deployer Deployer
}

// Deployer is the source of the rows a deployer mixed, when they are not the attacker's model's.
type Deployer interface {
	// Rows returns text id's rows at block l, (len(tokens), d), checked to be the rows of these
	// tokens at positions 0, 1, ...
	Rows(id int64, tokens []int, l int) ([]float32, error)
}

// scoring is what ranks a prefix's extensions and measures a step's lead, the end's lead and the
// order margin. Certification never depends on it: every attacked block's excess must be <= 0.
type scoring int

const (
	// worstBlock scores an extension by its worst attacked block's excess (the default).
	worstBlock scoring = iota
	// jointExcess sums the attacked blocks' excesses (Options.Joint): each block's U is a separate
	// observation of the same prefix, so each adds its evidence.
	jointExcess
	// jointTopK sums the blocks' top-k containment scores at Options.OrderTopK of each block's
	// rank (membership's other score past full rank).
	jointTopK
)

// scoring resolves the score's precedence: OrderTopK over Joint over the worst block.
func (o Options) scoring() scoring {
	switch {
	case o.OrderTopK > 0:
		return jointTopK
	case o.Joint:
		return jointExcess
	}
	return worstBlock
}

// search is the order search Rank picks, with RankBag its budget.
func (o Options) search() orderSearch {
	if o.Rank {
		return rankSearch{budget: o.RankBag}
	}
	return certifiedSearch{}
}

// blocks are the attacked blocks as given (empty: 0 and 1), before BagOnly narrows them to 0.
func (o Options) blocks() []int {
	if len(o.Blocks) == 0 {
		return []int{0, 1}
	}
	return o.Blocks
}

// check refuses what Run cannot honour, before any forward pass: every combination of the mode
// fields is checked here and nowhere else. nTexts is the number of source texts.
func (o Options) check(m Model, nTexts int) error {
	if o.OrderTopK != 0 && !slices.Contains(membership.TopKFractions(), o.OrderTopK) {
		return fmt.Errorf("decode: top-k order fraction %v: want one of %v", o.OrderTopK, membership.TopKFractions())
	}
	blocks := o.blocks()
	for _, b := range blocks {
		if b < 0 || b >= m.Blocks() {
			return fmt.Errorf("decode: block %d of a model with %d blocks", b, m.Blocks())
		}
	}
	switch {
	case o.BagOnly && !slices.Contains(blocks, 0):
		return fmt.Errorf("decode: blocks %v: the bag needs block 0", blocks)
	case !o.BagOnly && (!slices.Contains(blocks, 0) || len(orderBlocks(blocks)) == 0):
		return fmt.Errorf("decode: blocks %v: need block 0 (the bag) and one block >= 1 (the order)", blocks)
	}
	if o.Batches < 1 {
		return fmt.Errorf("decode: batches %d, want >= 1", o.Batches)
	}
	if o.TextIDs != nil && len(o.TextIDs) != nTexts {
		return fmt.Errorf("decode: %d text ids for %d texts", len(o.TextIDs), nTexts)
	}
	// Zero means the default for each of these; a negative (or NaN) value has no meaning.
	if o.Beam < 0 || o.MaxSteps < 0 || o.RankBag < 0 {
		return fmt.Errorf("decode: beam %d, max steps %d, rank bag %d: want >= 0 (0: the default)", o.Beam, o.MaxSteps, o.RankBag)
	}
	if !(o.Branch >= 0) || !(o.ClaimLead >= 0) {
		return fmt.Errorf("decode: branch %v, claim lead %v: want decades >= 0 (0: the default, 1)", o.Branch, o.ClaimLead)
	}
	if o.DeployerPrecision != "" && !slices.Contains(membership.ComputePrecisions, o.DeployerPrecision) {
		return fmt.Errorf("decode: deployer precision %q: want one of %v", o.DeployerPrecision, membership.ComputePrecisions)
	}
	if !(o.Recompute >= 0 && o.Recompute < 1) {
		return fmt.Errorf("decode: recomputation error %v: want 0 <= rho < 1 (0: from the deployer's precision)", o.Recompute)
	}
	if o.RankBag > 0 && !o.Rank {
		return fmt.Errorf("decode: a rank bag of %d needs Rank (the certified search tries the whole certified bag)", o.RankBag)
	}
	return nil
}

// orderBlocks are the attacked blocks >= 1, in the order given: what a step is scored on.
func orderBlocks(blocks []int) []int {
	var order []int
	for _, l := range blocks {
		if l > 0 {
			order = append(order, l)
		}
	}
	return order
}

// newAttack checks opt and resolves it for m: the defaults filled in, the modes as types.
func newAttack(m Model, opt Options, nTexts int) (*attack, error) {
	if err := opt.check(m, nTexts); err != nil {
		return nil, err
	}
	u, err := membership.UnitRoundoff(string(opt.Sampler.ObserveDtype))
	if err != nil {
		return nil, err
	}
	blocks := opt.blocks()
	if opt.BagOnly {
		blocks = []int{0} // block 0's rows need no block computed: the texts' forward stops there
	}
	upto := 0
	for _, b := range blocks {
		upto = max(upto, b+1)
	}
	beam := opt.Beam
	if beam == 0 {
		beam = 4 * max(1, int(opt.Sampler.Positives.Max))
	}
	rho, err := RecomputeBounds(opt, blocks, m.D())
	if err != nil {
		return nil, err
	}
	return &attack{m: m, d: m.D(), blocks: blocks, order: orderBlocks(blocks), upto: upto, u: u, rho: rho,
		beam: beam, branch: cmp.Or(opt.Branch, 1), claimLead: cmp.Or(opt.ClaimLead, 1),
		allObserved: opt.Sampler.ObsRows == 1, search: opt.search(), scoring: opt.scoring(), orderTopK: opt.OrderTopK,
		maxSteps: opt.MaxSteps, progress: opt.Progress, noOrderMargin: opt.NoOrderMargin, bagOnly: opt.BagOnly}, nil
}

// RecomputeBounds is rho at each of blocks, as Run's absolute tests allow it: opt.Recompute when
// set, else fptol.Recompute for the deployer's precision through l blocks of width d (block l's
// attention input has been through blocks 0..l-1).
func RecomputeBounds(opt Options, blocks []int, d int) (map[int]float64, error) {
	prec := cmp.Or(opt.DeployerPrecision, fptol.PrecisionFP32)
	rho := map[int]float64{}
	for _, l := range blocks {
		if opt.Recompute > 0 {
			rho[l] = opt.Recompute
			continue
		}
		r, err := fptol.Recompute(prec, l, d)
		if err != nil {
			return nil, fmt.Errorf("decode: block %d: %w", l, err)
		}
		if r >= 1 {
			return nil, fmt.Errorf("decode: block %d: a %s deployer's recomputation error %.3g leaves no bound to test", l, prec, r)
		}
		rho[l] = r
	}
	return rho, nil
}
