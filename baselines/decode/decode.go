package decode

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// Options configures Run.
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
	// RankBag, when > 0, keeps only the RankBag best tokens of the ranking search's bag: the
	// attacker's budget where the bag is certified but loose or ranked only (past full rank at
	// d = 4096 the certified bag held ~4,200 tokens, each a candidate pass per live prefix and
	// step, while every true token ranked among the first 70 to 330). A true token cut off is
	// lost to the order, so a cut bag forbids claims: a wrong text might lead only because the
	// true extension was not tried.
	RankBag int
	// OrderTopK, when > 0, ranks extensions (as Joint does, summed over the attacked blocks >= 1)
	// by top-k containment instead of the excess, k = OrderTopK x the block's rank, a fraction of
	// membership's grid (0.25, 0.375, ..., 0.9375): the other score past full rank, tried before
	// the order is called defended there. Certification and claims still rest on the excess.
	OrderTopK float64
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
	// NaN, nothing is decoded or claimed, and only block 0 is needed.
	BagOnly bool
}

// RankStop is the jump, in decades over the median of a prefix's steps, beyond which the ranking
// search calls an extension a miss: the true continuation scores like the steps before it, and
// once a text has ended every extension is wrong.
const RankStop = 1

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

// MarshalJSON writes an infinite Excess or Lead (a text of one step: nothing left out, or nothing
// certified) as null, which JSON can hold.
func (t Text) MarshalJSON() ([]byte, error) {
	type plain Text
	return json.Marshal(struct {
		plain
		Excess *float64 `json:"excess"`
		Lead   *float64 `json:"lead"`
	}{plain(t), finite(t.Excess), finite(t.Lead)})
}

// finite is &x, or nil for an infinite or NaN x.
func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

// MarshalJSON writes an infinite margin (nothing to separate) and a figure not measured (NaN:
// the order margin skipped, exact and token accuracy with BagOnly) as null, which JSON can hold.
func (r BatchResult) MarshalJSON() ([]byte, error) {
	type plain BatchResult
	return json.Marshal(struct {
		plain
		BagMargin     *float64 `json:"bag_margin"`
		OrderMargin   *float64 `json:"order_margin"`
		BagMarginTopK *float64 `json:"bag_margin_topk"`
		RankRecall    *float64 `json:"bag_rank_recall"`
		RecallTopK    *float64 `json:"bag_rank_recall_topk"`
		Exact         *float64 `json:"exact"`
		TokenAcc      *float64 `json:"token_accuracy"`
	}{plain(r), finite(r.BagMargin), finite(r.OrderMargin), finite(r.BagMarginTopK), finite(r.BagRankRecall), finite(r.BagRankRecallTopK), finite(r.Exact), finite(r.TokenAcc)})
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
	// Forwards is the candidate extensions computed; Seconds the batch's wall time.
	Forwards int     `json:"forwards"`
	Seconds  float64 `json:"seconds"`
}

// Run draws Batches GELO batches of texts (token ids, each a text of the source) through m and
// reads them back. Claims: a decoded text is claimed when every attacked block has an absolute
// test (below full rank the residual, at full rank with every row observed the leverage), every
// step of it was certified, led the best extension left out by ClaimLead decades and proves
// something beyond the rows already explained, its end led every extension by one more token as
// a step leads, and the batch's claims fit in U (claim.go).
func Run(ctx context.Context, m Model, texts [][]int, opt Options) ([]BatchResult, error) {
	blocks := opt.Blocks
	if len(blocks) == 0 {
		blocks = []int{0, 1}
	}
	if opt.OrderTopK != 0 && !slices.Contains(membership.TopKFractions(), opt.OrderTopK) {
		return nil, fmt.Errorf("decode: top-k order fraction %v: want one of %v", opt.OrderTopK, membership.TopKFractions())
	}
	upto := 0
	for _, b := range blocks {
		if b < 0 || b >= m.Blocks() {
			return nil, fmt.Errorf("decode: block %d of a model with %d blocks", b, m.Blocks())
		}
		upto = max(upto, b+1)
	}
	if opt.BagOnly {
		if !slices.Contains(blocks, 0) {
			return nil, fmt.Errorf("decode: blocks %v: the bag needs block 0", blocks)
		}
		blocks, upto = []int{0}, 1 // block 0's rows need no block computed: the texts' forward stops there
	} else if !slices.Contains(blocks, 0) || upto < 2 {
		return nil, fmt.Errorf("decode: blocks %v: need block 0 (the bag) and one block >= 1 (the order)", blocks)
	}
	if opt.Batches < 1 {
		return nil, fmt.Errorf("decode: batches %d, want >= 1", opt.Batches)
	}
	if opt.TextIDs != nil && len(opt.TextIDs) != len(texts) {
		return nil, fmt.Errorf("decode: %d text ids for %d texts", len(opt.TextIDs), len(texts))
	}
	beam, branch, claimLead := opt.Beam, opt.Branch, opt.ClaimLead
	if beam == 0 {
		beam = 4 * max(1, int(opt.Sampler.Positives.Max))
	}
	if branch == 0 {
		branch = 1
	}
	if claimLead == 0 {
		claimLead = 1
	}
	u, err := membership.UnitRoundoff(string(opt.Sampler.ObserveDtype))
	if err != nil {
		return nil, err
	}
	d := m.D()
	// One corpus per block: the deployer's rows of every source text.
	corpora := make([]*data.MemCorpus, upto)
	for l := range corpora {
		corpora[l] = data.NewMemCorpus(d, 1)
	}
	longest := 0
	for i, toks := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(toks) == 0 {
			return nil, fmt.Errorf("decode: text %d is empty", i)
		}
		rows, err := m.Rows(toks, upto)
		if err != nil {
			return nil, fmt.Errorf("decode: text %d: %w", i, err)
		}
		id := int64(i)
		if opt.TextIDs != nil {
			id = opt.TextIDs[i]
		}
		for l := range corpora {
			if err := corpora[l].Add(id, rows[l], []float32{0}); err != nil {
				return nil, fmt.Errorf("decode: text %d: %w", i, err)
			}
		}
		longest = max(longest, len(toks))
	}
	cfg := opt.Sampler
	cfg.TokensPerText, cfg.TokenSampling = gelo.Fixed(float64(longest)), gelo.TokenWindow
	samplers := map[int]*gelo.Sampler{}
	for _, l := range blocks {
		c := cfg
		c.Call = uint64(l) + 1 // a fresh A and fresh shields per block's protected call
		s, err := gelo.NewSampler(corpora[l], c)
		if err != nil {
			return nil, fmt.Errorf("decode: block %d: %w", l, err)
		}
		samplers[l] = s
	}
	var order []int
	for _, l := range blocks {
		if l > 0 {
			order = append(order, l)
		}
	}
	a := &attack{m: m, d: d, blocks: blocks, order: order, upto: upto, u: u, beam: beam, branch: branch, claimLead: claimLead,
		allObserved: cfg.ObsRows == 1, rank: opt.Rank, rankBag: opt.RankBag, maxSteps: opt.MaxSteps, progress: opt.Progress, joint: opt.Joint || opt.OrderTopK > 0, orderTopK: opt.OrderTopK, noOrderMargin: opt.NoOrderMargin, bagOnly: opt.BagOnly}
	var out []BatchResult
	ws := new(gelo.Workspace)
	for b := 0; b < opt.Batches; b++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := a.batch(ctx, samplers, ws, opt.Split, int64(b), texts)
		if err != nil {
			return nil, fmt.Errorf("decode: batch %d: %w", b, err)
		}
		out = append(out, *res)
	}
	return out, nil
}

// attack holds what one batch's decoding needs.
type attack struct {
	m                 Model
	d, upto           int
	blocks            []int
	order             []int // the attacked blocks >= 1, in the order of blocks: what a step is scored on
	u                 float64
	beam              int
	branch, claimLead float64
	allObserved       bool
	rank, joint       bool
	rankBag           int
	orderTopK         float64
	bagCut            bool // the ranking bag was cut to rankBag: no claims
	maxSteps          int
	progress          func(string)
	batchIndex        int64
	start             time.Time
	noOrderMargin     bool
	bagOnly           bool
	spaces            map[int]*membership.Space
	leftOutThr        float64 // excess a left-out extension needs for its step to count towards a claim
	forwards          int
}

// batch draws batch index's example at every attacked block and decodes it.
func (a *attack) batch(ctx context.Context, samplers map[int]*gelo.Sampler, ws *gelo.Workspace, split data.Split, index int64, texts [][]int) (*BatchResult, error) {
	start := time.Now()
	a.spaces, a.forwards, a.batchIndex, a.start = map[int]*membership.Space{}, 0, index, start
	res := &BatchResult{Index: index, D: a.d}
	for k, l := range a.blocks {
		ex, err := samplers[l].ExampleWith(ws, split, index)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		if k == 0 {
			for _, ti := range ex.PositiveIdx {
				res.Truth = append(res.Truth, texts[ti])
			}
			res.N, res.NObs = ex.N, ex.NObs
		}
		uObs := mat.NewDense(ex.NObs, a.d, nil)
		for i, x := range ex.UObs {
			uObs.RawMatrix().Data[i] = float64(x)
		}
		sp, err := membership.New(uObs, membership.Options{UnitRoundoff: a.u, AllObserved: a.allObserved, RankTol: membership.RankTol(uObs, a.u)})
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		a.spaces[l] = sp
		res.Rank = append(res.Rank, sp.Rank())
		a.report("block %d: U %d x %d, rank %d", l, ex.NObs, a.d, sp.Rank())
	}
	a.leftOutThr = 0
	for _, sp := range a.spaces {
		if sp.FullRank() {
			a.leftOutThr = math.Log10(LeftOutAbove)
		}
	}
	// Bag only past full rank, the bag is also scored by top-k containment, from the same pass.
	sp0 := a.spaces[0]
	withTopK := a.bagOnly && sp0.FullRank() && len(sp0.Ks()) > 0
	bagScores, topK, err := a.bagScores(ctx, withTopK)
	if err != nil {
		return nil, err
	}
	truthSet := map[int]bool{}
	for _, t := range res.Truth {
		for _, v := range t {
			truthSet[v] = true
		}
	}
	res.Bag = a.bag(bagScores, res.NObs)
	if a.rank && (len(res.Bag) == 0 || !a.allObserved || !a.certifiable()) {
		res.Bag = rankBag(bagScores, res.NObs)
	}
	a.bagCut = false
	if a.rank && a.rankBag > 0 && len(res.Bag) > a.rankBag {
		res.Bag, a.bagCut = res.Bag[:a.rankBag], true
	}
	a.report("bag: %d tokens of %d", len(res.Bag), len(bagScores))
	hit := 0
	for _, v := range res.Bag {
		if truthSet[v] {
			hit++
		}
	}
	if len(res.Bag) > 0 {
		res.BagPrecision = float64(hit) / float64(len(res.Bag))
	}
	res.BagRecall = float64(hit) / float64(len(truthSet))
	res.BagMargin = separation(bagScores, truthSet)
	res.BagRankRecall, res.BagWorstRank = rankRecall(bagScores, truthSet)
	res.BagMarginTopK, res.BagRankRecallTopK = math.NaN(), math.NaN()
	if a.bagOnly {
		if withTopK {
			res.BagMarginTopK, res.BagTopK = bestTopKMargin(topK, sp0.Ks(), truthSet)
			if j := slices.Index(sp0.Ks(), res.BagTopK); j >= 0 { // -1 when no k gave a finite margin
				res.BagRankRecallTopK, _ = rankRecall(topK[j], truthSet)
			}
		}
		res.OrderMargin, res.Exact, res.TokenAcc = math.NaN(), math.NaN(), math.NaN()
		res.Seconds = time.Since(start).Seconds()
		return res, nil
	}

	search := a.search
	if a.rank {
		search = a.rankSearch
	}
	decoded, err := search(ctx, res.Bag, res.NObs)
	if err != nil {
		return nil, err
	}
	res.OrderMargin = math.NaN()
	if !a.noOrderMargin {
		if res.OrderMargin, err = a.orderMargin(res.Truth, res.Bag); err != nil {
			return nil, err
		}
	}
	res.Overclaimed = a.decide(decoded, res.NObs)
	exact := 0
	for i := range decoded {
		decoded[i].Match = -1
		for j, t := range res.Truth {
			if slices.Equal(decoded[i].Tokens, t) {
				decoded[i].Match = j
			}
		}
	}
	res.Claims, res.ClaimsRight = tally(decoded, res.Truth)
	for i := range decoded {
		decoded[i].hist = nil // the claims are decided: a batch result need not hold the rows
	}
	for _, t := range res.Truth {
		best := 0.0
		found := false
		for _, dt := range decoded {
			if slices.Equal(dt.Tokens, t) {
				found = true
			}
			best = max(best, positionwise(dt.Tokens, t))
		}
		if found {
			exact++
		}
		res.TokenAcc += best / float64(len(res.Truth))
	}
	res.Exact = float64(exact) / float64(len(res.Truth))
	res.Decoded = decoded
	res.Forwards = a.forwards
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// excessOf is each row's score over block l's certification bound in decades (<= 0: certified),
// from a Score of the rows against the block's space: the residual below full rank, the leverage
// at full rank.
func (a *attack) excessOf(l int, sc *membership.Scores) []float64 {
	sp := a.spaces[l]
	out := make([]float64, len(sc.Residual))
	for i := range out {
		switch {
		case !sp.FullRank():
			out[i] = math.Log10(max(sc.Residual[i], 1e-30) / a.residualBound(l))
		case sp.LeverageBound() > 0:
			out[i] = math.Log10(max(sc.Leverage[i], 1e-30) / sp.LeverageBound())
		default:
			// No absolute test (rows dropped past full rank): leverage against the bound an
			// observation of every row would have, to rank; certifiable() then forbids claims.
			out[i] = math.Log10(max(sc.Leverage[i], 1e-30) / (1 + membership.LeverageSlack))
		}
	}
	return out
}

// topKOf is log10 of each row's energy fraction outside the top k right singular directions of
// sp, k = round(frac * rank): the fraction grid of membership's Ks, so every block has that k.
func topKOf(sp *membership.Space, sc *membership.Scores, frac float64) ([]float64, error) {
	k := int(math.Round(frac * float64(sp.Rank())))
	j := slices.Index(sp.Ks(), k)
	if j < 0 {
		return nil, fmt.Errorf("top-k order score: k %d (%.4g of rank %d) is not among the space's %v", k, frac, sp.Rank(), sp.Ks())
	}
	out := make([]float64, len(sc.TopK[j]))
	for i, r := range sc.TopK[j] {
		out[i] = math.Log10(max(r, 1e-300))
	}
	return out, nil
}

// LeftOutAbove is how far above the leverage bound (a factor) the best extension left out must
// lie for a step to count towards a claim when a block is past full rank: 2, as
// content.LeverageRunnerUp (below full rank, outside the residual bound is enough).
const LeftOutAbove = 2

// vocabChunk is how many vocabulary rows are scored at once.
const vocabChunk = 2048

// bagScores scores every vocabulary row of block 0 against U_0 (its excess over the bound, by
// the residual below full rank and the leverage at full rank) and, with topK, also by top-k
// containment: per k of the space's Ks, log10 of the fraction of the row's energy outside U_0's
// top k right singular directions, from the same Score of each chunk.
func (a *attack) bagScores(ctx context.Context, topK bool) ([]float64, [][]float64, error) {
	sp := a.spaces[0]
	v := a.m.Vocab()
	out := make([]float64, 0, v)
	var tk [][]float64 // (len(Ks), vocab)
	if topK {
		tk = make([][]float64, len(sp.Ks()))
	}
	buf := make([]float32, vocabChunk*a.d)
	for lo := 0; lo < v; lo += vocabChunk {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		hi := min(v, lo+vocabChunk)
		if err := a.m.Block0(lo, hi, buf[:(hi-lo)*a.d]); err != nil {
			return nil, nil, fmt.Errorf("vocabulary rows [%d, %d): %w", lo, hi, err)
		}
		sc, err := sp.Score(toDense(buf[:(hi-lo)*a.d], hi-lo, a.d))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, a.excessOf(0, sc)...)
		for j := range tk {
			for _, r := range sc.TopK[j] {
				tk[j] = append(tk[j], math.Log10(max(r, 1e-300)))
			}
		}
	}
	return out, tk, nil
}

// bestTopKMargin is the best separation of the true tokens from the rest over the top-k scores
// (one per k of ks), and its k: the score leverage does not cover, tried before a setting is
// called a defence of the bag.
func bestTopKMargin(topK [][]float64, ks []int, truth map[int]bool) (float64, int) {
	best, bestK := math.Inf(-1), 0
	for j, k := range ks {
		if m := separation(topK[j], truth); m > best {
			best, bestK = m, k
		}
	}
	return best, bestK
}

// bag is the certified tokens, best first, at most nObs of them (a batch of n_obs observed rows
// holds at most that many distinct tokens).
func (a *attack) bag(scores []float64, nObs int) []int {
	var bag []int
	for v, e := range scores {
		if e <= 0 {
			bag = append(bag, v)
		}
	}
	sort.SliceStable(bag, func(i, j int) bool { return scores[bag[i]] < scores[bag[j]] })
	if len(bag) > nObs {
		bag = bag[:nObs]
	}
	return bag
}

// extensions are the scores of every bag token appended to one prefix.
type extensions struct {
	// cert certifies (<= 0: every attacked block's excess is), score ranks and measures leads
	// (cert itself, or with Joint the blocks' sum); both +Inf for an extension repeating a row of
	// its prefix. rawCert and rawScore are the same before that: such an extension is no evidence
	// of a longer text, but neither can U tell it from the text's end (endProven).
	cert, score, rawCert, rawScore []float64
	// blockEx is each extension's excess at each attacked block >= 1: (bag, len(order)).
	blockEx []float64
	// rows are the extensions' rows (bag, upto-1, d); order the extensions by ascending score.
	rows  []float32
	order []int
	w, nb int // one extension's row floats ((upto-1) d) and attacked blocks >= 1
}

// row is extension i's rows at blocks 1..upto-1: ((upto-1) d).
func (e *extensions) row(i int) []float32 { return e.rows[i*e.w : (i+1)*e.w] }

// ex is extension i's excess at each attacked block >= 1: (len(order)).
func (e *extensions) ex(i int) []float64 { return e.blockEx[i*e.nb : (i+1)*e.nb] }

// step is what a text keeps of extension i of its prefix, ambiguous as rule 1 says: copies, since
// a slice of e's buffers would keep every candidate's rows alive (past full rank at d = 4096 a
// bag of thousands of tokens, hundreds of MB per step).
func (e *extensions) step(i int, ambiguous bool) step {
	return step{rows: slices.Clone(e.row(i)), ex: slices.Clone(e.ex(i)), ambiguous: ambiguous}
}

// scoreExtensions scores every bag token appended to nd's prefix.
func (a *attack) scoreExtensions(nd node, bag []int) (*extensions, error) {
	cert, joint, blockEx, rows, err := a.extend(nd.p, bag)
	if err != nil {
		return nil, err
	}
	e := &extensions{cert: cert, score: cert, rawCert: slices.Clone(cert), blockEx: blockEx, rows: rows,
		w: (a.upto - 1) * a.d, nb: len(a.order)}
	if a.joint {
		e.score = joint
	}
	e.rawScore = slices.Clone(e.score)
	// An extension whose rows repeat a row of its own prefix adds nothing the row space can see
	// (a token repeated from the start, "A A", attends to identical keys and values and gives
	// position 0's rows again): it is not evidence of a longer text.
	for i := range bag {
		for _, prev := range nd.hist {
			if sameRows(e.row(i), prev.rows) {
				e.cert[i], e.score[i] = math.Inf(1), math.Inf(1)
				break
			}
		}
	}
	e.order = ascending(e.score)
	return e, nil
}

// ascending is the indices of scores, best (lowest) first; ties keep their order.
func ascending(scores []float64) []int {
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] < scores[order[j]] })
	return order
}

// rankBag is the nObs best-scoring tokens, best first: the bag as ranking alone gives it, without
// a bound (a batch of nObs observed rows shows at most that many distinct tokens; the order
// search then uses only those its ranking picks).
func rankBag(scores []float64, nObs int) []int {
	return ascending(scores)[:min(nObs, len(scores))]
}

// node is a live prefix of the search.
type node struct {
	// p is the prefix run through the model; a new extension holds only its parent until it
	// survives the beam (advance), since running the token through every block costs as much as
	// scoring a whole batch of candidates and past full rank most extensions are cut.
	p      Prefix
	parent Prefix
	toks   []int
	excess float64 // worst step's excess
	lead   float64 // smallest lead of a kept step
	worst  float64 // worst step's score (what ranks extensions): the end must lead it (endProven)
	hist   []step  // each step's rows and excesses
}

// root is the empty prefix.
func (a *attack) root() node {
	return node{p: a.m.NewPrefix(), excess: math.Inf(-1), lead: math.Inf(1), worst: math.Inf(-1)}
}

// child is nd extended by extension i of e (bag token tok), its step's lead and ambiguity.
func (nd node) child(e *extensions, i, tok int, lead float64, ambiguous bool) node {
	return node{parent: nd.p, toks: append(slices.Clone(nd.toks), tok),
		excess: max(nd.excess, e.cert[i]), lead: min(nd.lead, lead), worst: max(nd.worst, e.score[i]),
		hist: append(slices.Clip(nd.hist), e.step(i, ambiguous))}
}

// text is nd as a decoded text; open says its end is not proven.
func (nd node) text(open bool) Text {
	return Text{Tokens: nd.toks, Excess: nd.excess, Lead: nd.lead, Open: open, hist: nd.hist}
}

// advance runs the extension's last token through the model from its parent's prefix.
func (n *node) advance() error {
	if n.p != nil {
		return nil
	}
	p, err := n.parent.Append(n.toks[len(n.toks)-1])
	if err != nil {
		return err
	}
	n.p, n.parent = p, nil
	return nil
}

// stepLead is a step's lead: how far the best extension left out (out, by ascending score) lies
// beyond the worst kept one, counted only when every extension left out is itself outside the
// certification bound (by LeftOutAbove past full rank): a choice between certified extensions
// proves nothing. With Joint the best left out by score need not be the best by certification, so
// every one left out is checked. -Inf: the step proves nothing.
func (a *attack) stepLead(e *extensions, worstKept float64, out []int) float64 {
	if len(out) == 0 || slices.ContainsFunc(out, func(i int) bool { return !(e.cert[i] > a.leftOutThr) }) {
		return math.Inf(-1)
	}
	return e.score[out[0]] - worstKept
}

// ambiguities is ambiguity where a step's lead can count, all false where it cannot (the text is
// not claimed then anyway, and past full rank the certified extensions can be thousands).
func (a *attack) ambiguities(nd node, e *extensions, kept []int, lead float64) []bool {
	if math.IsInf(lead, -1) {
		return make([]bool, len(kept))
	}
	return a.ambiguity(nd, e, kept)
}

// search reads texts from the bag: prefixes extended by every bag token, keeping per prefix the
// certified extensions within branch decades of its best; a prefix with no certified extension
// is a finished text. At most nObs steps (every token of a text is an observed row).
func (a *attack) search(ctx context.Context, bag []int, nObs int) ([]Text, error) {
	if len(bag) == 0 {
		return nil, nil
	}
	live := []node{a.root()}
	var done []Text
	for step := 0; step < a.steps(nObs) && len(live) > 0; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a.report("step %d of at most %d: %d live prefixes, %d texts done", step+1, a.steps(nObs), len(live), len(done))
		var next []node
		rejected := false // some extension of some prefix was not certified
		for _, nd := range live {
			e, err := a.scoreExtensions(nd, bag)
			if err != nil {
				return nil, err
			}
			certified := func(i int) bool { return e.cert[i] <= 0 }
			rejected = rejected || slices.ContainsFunc(e.order, func(i int) bool { return !certified(i) })
			first := slices.IndexFunc(e.order, certified)
			if first < 0 {
				if len(nd.toks) > 0 {
					done = append(done, nd.text(!a.endProven(nd, e)))
				}
				continue
			}
			best := e.score[e.order[first]]
			var kept, out []int // kept: certified within branch of the best; out: the rest
			for _, i := range e.order {
				if certified(i) && e.score[i] <= best+a.branch {
					kept = append(kept, i)
				} else {
					out = append(out, i)
				}
			}
			lead := a.stepLead(e, e.score[kept[len(kept)-1]], out)
			amb := a.ambiguities(nd, e, kept, lead)
			for j, i := range kept {
				next = append(next, nd.child(e, i, bag[i], lead, amb[j]))
			}
		}
		sort.SliceStable(next, func(i, j int) bool { return next[i].excess < next[j].excess })
		if len(next) > a.beam {
			next = next[:a.beam]
		}
		for i := range next {
			if err := next[i].advance(); err != nil {
				return nil, err
			}
		}
		live = next
		if !rejected {
			// Every extension of every prefix passed: the test separates nothing here (strong
			// shields past full rank). Reading on would only enumerate the beam.
			break
		}
	}
	for _, nd := range live { // the search stopped reading them: their end is not tested
		done = append(done, nd.text(true))
	}
	return done, nil
}

// rankNode is a live prefix of the ranking search.
type rankNode struct {
	node
	steps   []float64 // score of each step after the first that was not a miss
	misses  int       // misses so far; pending says the last step was one
	pending bool
	// prev is the parent, for a text cut back before a pending miss.
	prev *node
}

// median of the steps so far (-Inf before the first).
func (n *rankNode) median() float64 {
	if len(n.steps) == 0 {
		return math.Inf(-1)
	}
	s := slices.Clone(n.steps)
	slices.Sort(s)
	return s[len(s)/2]
}

// key orders the beam: the mean step score, each miss counting RankStop decades above the median.
func (n *rankNode) key() float64 {
	if len(n.steps) == 0 {
		return math.Inf(-1)
	}
	var sum float64
	for _, e := range n.steps {
		sum += e
	}
	return (sum + float64(n.misses)*(n.median()+RankStop)) / float64(len(n.steps)+n.misses)
}

// rankSearch reads texts from the bag by ranking alone. Each prefix keeps its best extensions
// (within branch decades of the best); an extension scoring more than RankStop decades above the
// median of the prefix's steps is a miss, which a text may make once in a row (a row the deployer
// dropped from U, or a step rounding blurred) and not twice: a prefix whose best extension is a
// second miss in a row ends as the text before the first. The beam keeps the prefixes of the best
// mean step score. Texts are claimed by the rule of search (every step certified, the end proven),
// so dropped rows give none.
func (a *attack) rankSearch(ctx context.Context, bag []int, nObs int) ([]Text, error) {
	if len(bag) == 0 {
		return nil, nil
	}
	live := []rankNode{{node: a.root()}}
	var done []Text
	seen := map[string]bool{}
	// finish records n as a text. proven says its end is (endProven); a text cut back before a
	// miss, whose own end was never tested, is open.
	finish := func(n rankNode, proven bool) {
		nd := n.node
		if n.pending {
			nd, proven = *n.prev, false
		}
		if len(nd.toks) == 0 || seen[fmt.Sprint(nd.toks)] {
			return
		}
		seen[fmt.Sprint(nd.toks)] = true
		done = append(done, nd.text(!proven))
	}
	for step := 0; step < a.steps(nObs) && len(live) > 0; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a.report("step %d of at most %d: %d live prefixes, %d texts done", step+1, a.steps(nObs), len(live), len(done))
		var next []rankNode
		for _, nd := range live {
			e, err := a.scoreExtensions(nd.node, bag)
			if err != nil {
				return nil, err
			}
			best := e.score[e.order[0]]
			if math.IsInf(best, 1) {
				finish(nd, a.endProven(nd.node, e))
				continue
			}
			thr := nd.median() + RankStop
			miss := len(nd.steps) > 0 && best > thr
			if miss && nd.pending {
				finish(nd, false)
				continue
			}
			if miss {
				// The text may end here, or a row of it was lost: keep both readings.
				finish(nd, a.endProven(nd.node, e))
			}
			kept := 0
			for kept < len(e.order) && !math.IsInf(e.score[e.order[kept]], 1) && e.score[e.order[kept]] <= best+a.branch {
				kept++
			}
			lead := a.stepLead(e, e.score[e.order[kept-1]], e.order[kept:])
			amb := a.ambiguities(nd.node, e, e.order[:kept], lead)
			parent := nd.node
			parent.p, parent.parent = nil, nil // a text cut back needs no model state
			for j, i := range e.order[:kept] {
				c := rankNode{node: nd.child(e, i, bag[i], lead, amb[j]), steps: nd.steps, misses: nd.misses, prev: &parent}
				switch {
				case len(nd.steps) > 0 && e.score[i] > thr:
					c.misses++
					c.pending = true
				case len(nd.toks) > 0:
					// The first token's rows are a function of the token alone (BOS's, identical
					// in every text, lie far inside): they say nothing of the order's scale.
					c.steps = append(slices.Clip(nd.steps), e.score[i])
				}
				next = append(next, c)
			}
		}
		sort.SliceStable(next, func(i, j int) bool { return next[i].key() < next[j].key() })
		if len(next) > a.beam {
			next = next[:a.beam]
		}
		for i := range next {
			if err := next[i].advance(); err != nil {
				return nil, err
			}
		}
		live = next
	}
	for _, nd := range live { // the search stopped reading them: their end is not tested
		finish(nd, false)
	}
	return done, nil
}

// report sends a progress line, prefixed with the batch, the candidate passes so far and the
// batch's elapsed time, to Options.Progress.
func (a *attack) report(format string, args ...any) {
	if a.progress == nil {
		return
	}
	a.progress(fmt.Sprintf("batch %d (%.0f s, %d candidate passes): ", a.batchIndex, time.Since(a.start).Seconds(), a.forwards) + fmt.Sprintf(format, args...))
}

// steps is the longest text a search reads: n_obs rows hold at most n_obs tokens, the model's
// context bounds a prompt, and MaxSteps, where set, is the attacker's own bound.
func (a *attack) steps(nObs int) int {
	n := min(nObs, a.m.MaxLen())
	if a.maxSteps > 0 {
		n = min(n, a.maxSteps)
	}
	return n
}

// certifiable says every attacked block offers an absolute test and the search had the whole bag.
func (a *attack) certifiable() bool {
	if a.bagCut {
		return false
	}
	for _, sp := range a.spaces {
		if sp.FullRank() && sp.LeverageBound() == 0 {
			return false
		}
	}
	return true
}

// extend scores every candidate token appended to p: the worst excess over the attacked blocks
// >= 1 (the certification), their sum (the joint score: every block's U is seen, and each adds its
// evidence; with OrderTopK the sum of the blocks' top-k scores instead), each block's excess
// (cands, len(order)), and the candidates' rows (cands, upto-1, d).
func (a *attack) extend(p Prefix, cands []int) (worst, joint, blockEx []float64, rows []float32, err error) {
	d, nb := a.d, len(a.order)
	buf := make([]float32, len(cands)*(a.upto-1)*d) // (cands, upto-1, d)
	if err := p.Extend(cands, a.upto, buf); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("extending a prefix of %d tokens: %w", p.Len(), err)
	}
	a.forwards += len(cands)
	worst = make([]float64, len(cands))
	joint = make([]float64, len(cands))
	blockEx = make([]float64, len(cands)*nb) // (cands, nb)
	for i := range worst {
		worst[i] = math.Inf(-1)
	}
	blockRows := make([]float32, len(cands)*d) // (cands, d)
	for k, l := range a.order {
		for c := range cands {
			copy(blockRows[c*d:(c+1)*d], buf[(c*(a.upto-1)+l-1)*d:(c*(a.upto-1)+l)*d])
		}
		sp := a.spaces[l]
		sc, err := sp.Score(toDense(blockRows, len(cands), d))
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("block %d: %w", l, err)
		}
		e := a.excessOf(l, sc)
		rankBy := e
		if a.orderTopK > 0 {
			if rankBy, err = topKOf(sp, sc, a.orderTopK); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("block %d: %w", l, err)
			}
		}
		for c := range worst {
			worst[c] = max(worst[c], e[c])
			joint[c] += rankBy[c]
			blockEx[c*nb+k] = e[c]
		}
	}
	return worst, joint, blockEx, buf, nil
}

// sameRows says two rows agree to float32 round-off (relative 1e-6 of their norm).
func sameRows(x, y []float32) bool {
	var diff, norm float64
	for i, v := range x {
		dv := float64(v) - float64(y[i])
		diff += dv * dv
		norm += float64(v) * float64(v)
	}
	return diff <= 1e-12*norm
}

// orderMargin is, along every true text, the best wrong extension's excess minus the true next
// token's, the smallest over steps and texts (decades; > 0: the order is separable). Wrong
// extensions that repeat a row of the true prefix are left out, as the search leaves them out.
func (a *attack) orderMargin(truth [][]int, bag []int) (float64, error) {
	margin := math.Inf(1)
	w := (a.upto - 1) * a.d
	for _, t := range truth {
		cands := slices.Clone(bag)
		for _, v := range t {
			if !slices.Contains(cands, v) {
				cands = append(cands, v)
			}
		}
		p := a.m.NewPrefix()
		var seen [][]float32
		for pos, v := range t {
			// Tokens that continue some true text with this prefix are not wrong.
			right := map[int]bool{}
			for _, o := range truth {
				if len(o) > pos && slices.Equal(o[:pos], t[:pos]) {
					right[o[pos]] = true
				}
			}
			ex, joint, _, rows, err := a.extend(p, cands)
			if a.joint {
				ex = joint
			}
			if err != nil {
				return 0, err
			}
			truthEx, wrong := 0.0, math.Inf(1)
			var truthRows []float32
			for i, c := range cands {
				r := rows[i*w : (i+1)*w]
				if c == v {
					truthEx, truthRows = ex[i], r
					continue
				}
				if !right[c] && !slices.ContainsFunc(seen, func(prev []float32) bool { return sameRows(r, prev) }) {
					wrong = min(wrong, ex[i])
				}
			}
			margin = min(margin, wrong-truthEx)
			seen = append(seen, truthRows)
			if p, err = p.Append(v); err != nil {
				return 0, err
			}
		}
	}
	return margin, nil
}

// separation is the best score outside set minus the worst inside (decades).
func separation(scores []float64, set map[int]bool) float64 {
	worstIn, bestOut := math.Inf(-1), math.Inf(1)
	for v, e := range scores {
		if set[v] {
			worstIn = max(worstIn, e)
		} else {
			bestOut = min(bestOut, e)
		}
	}
	return bestOut - worstIn
}

// rankRecall is the fraction of set among the len(set) lowest scores, in the order rankBag takes
// them (ascending), and the 1-based rank of set's worst-scoring member.
func rankRecall(scores []float64, set map[int]bool) (float64, int) {
	if len(set) == 0 {
		return math.NaN(), 0
	}
	hit, worst := 0, 0
	for r, v := range ascending(scores) {
		if set[v] {
			if r < len(set) {
				hit++
			}
			worst = r + 1
		}
	}
	return float64(hit) / float64(len(set)), worst
}

// positionwise is the fraction of truth's positions where got holds the same token.
func positionwise(got, truth []int) float64 {
	same := 0
	for i := range min(len(got), len(truth)) {
		if got[i] == truth[i] {
			same++
		}
	}
	return float64(same) / float64(len(truth))
}

// toDense copies float32 rows (n, d) into a float64 matrix.
func toDense(x []float32, n, d int) *mat.Dense {
	out := mat.NewDense(n, d, nil)
	for i, v := range x[:n*d] {
		out.RawMatrix().Data[i] = float64(v)
	}
	return out
}
