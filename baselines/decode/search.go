package decode

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gelo-research/geloattack/baselines/membership"
)

// orderSearch reads the texts' order from block 0's scores: certifiedSearch (the default) or
// rankSearch (Options.Rank). Each picks its own bag, since what the search may extend prefixes by
// is part of what it assumes.
type orderSearch interface {
	// bag is the tokens, best first, that prefixes are extended by, from block 0's excess of every
	// vocabulary token (vocab); cut says tokens the bag holds were left out (no claims then).
	bag(a *attack, scores []float64, nObs int) (bag []int, cut bool)
	// read decodes the texts of the batch whose spaces a holds, at most a.steps(nObs) tokens each.
	read(ctx context.Context, a *attack, bag []int, nObs int) ([]Text, error)
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

// survive is the beam's cut of a step's extensions: next ordered by key (stable, so ties keep
// the order they were found in), the best beam of them kept and only those run through the model.
func survive[N any, P interface {
	*N
	advance() error
}](next []N, beam int, key func(P) float64) ([]N, error) {
	sort.SliceStable(next, func(i, j int) bool { return key(&next[i]) < key(&next[j]) })
	if len(next) > beam {
		next = next[:beam]
	}
	for i := range next {
		if err := P(&next[i]).advance(); err != nil {
			return nil, err
		}
	}
	return next, nil
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

// extensions are the scores of every bag token appended to one prefix.
type extensions struct {
	// cert certifies (<= 0: every attacked block's excess is), score ranks and measures leads
	// (a.scoring: cert itself, or the blocks' sum); both +Inf for an extension repeating a row of
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

// eachExtensions scores every bag token appended to each node's prefix and calls fn with node i's
// extensions, in node order. Where the model batches prefixes (PrefixBatcher), the nodes whose
// candidates fit its batch go through the blocks in one pass; otherwise, and past full rank where
// one node's bag fills a batch, one node at a time, so that only those nodes' rows are held.
func (a *attack) eachExtensions(nodes []node, bag []int, fn func(i int, e *extensions) error) error {
	per := 1
	pb, ok := a.m.(PrefixBatcher)
	if ok && len(bag) > 0 {
		per = max(pb.BatchRows()/len(bag), 1)
	}
	for lo := 0; lo < len(nodes); lo += per {
		group := nodes[lo:min(lo+per, len(nodes))]
		var rows []float32 // (len(group), bag, upto-1, d)
		if len(group) > 1 {
			ps := make([]Prefix, len(group))
			for i, nd := range group {
				ps[i] = nd.p
			}
			rows = make([]float32, len(group)*len(bag)*(a.upto-1)*a.d)
			if err := pb.ExtendAll(ps, bag, a.upto, rows); err != nil {
				return fmt.Errorf("extending %d prefixes: %w", len(group), err)
			}
		}
		for i, nd := range group {
			var given []float32
			if rows != nil {
				w := len(bag) * (a.upto - 1) * a.d
				given = rows[i*w : (i+1)*w]
			}
			e, err := a.scoreExtensions(nd, bag, given)
			if err != nil {
				return err
			}
			if err := fn(lo+i, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// scoreExtensions scores every bag token appended to nd's prefix; rows, when not nil, are the
// extensions' rows already computed (bag, upto-1, d).
func (a *attack) scoreExtensions(nd node, bag []int, rows []float32) (*extensions, error) {
	cert, score, blockEx, rows, err := a.extendRows(nd.p, bag, rows)
	if err != nil {
		return nil, err
	}
	e := &extensions{cert: cert, score: score, rawCert: slices.Clone(cert), rawScore: slices.Clone(score),
		blockEx: blockEx, rows: rows, w: (a.upto - 1) * a.d, nb: len(a.order)}
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

// extend scores every candidate token appended to p at the attacked blocks >= 1. It returns the
// certification (the worst block's excess: <= 0 when every block's is), the score that ranks them
// (a.scoring: the certification itself, or the sum over the blocks, since every block's U is seen
// and each adds its evidence), each block's excess (cands, len(order)) and the candidates' rows
// (cands, upto-1, d).
func (a *attack) extend(p Prefix, cands []int) (cert, score, blockEx []float64, rows []float32, err error) {
	return a.extendRows(p, cands, nil)
}

// extendRows is extend with the candidates' rows (cands, upto-1, d) computed already, unless
// given is nil.
func (a *attack) extendRows(p Prefix, cands []int, given []float32) (cert, score, blockEx []float64, rows []float32, err error) {
	d, nb := a.d, len(a.order)
	rows = given
	if rows == nil {
		rows = make([]float32, len(cands)*(a.upto-1)*d) // (cands, upto-1, d)
		if err := p.Extend(cands, a.upto, rows); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("extending a prefix of %d tokens: %w", p.Len(), err)
		}
	}
	a.forwards += len(cands)
	cert = make([]float64, len(cands))
	sum := make([]float64, len(cands))
	blockEx = make([]float64, len(cands)*nb) // (cands, nb)
	for i := range cert {
		cert[i] = math.Inf(-1)
	}
	blockRows := make([]float32, len(cands)*d) // (cands, d)
	for k, l := range a.order {
		for c := range cands {
			copy(blockRows[c*d:(c+1)*d], rows[(c*(a.upto-1)+l-1)*d:(c*(a.upto-1)+l)*d])
		}
		ex, rankBy, err := a.blockScores(l, blockRows, len(cands))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for c := range cert {
			cert[c] = max(cert[c], ex[c])
			sum[c] += rankBy[c]
			blockEx[c*nb+k] = ex[c]
		}
	}
	if a.scoring == worstBlock {
		return cert, cert, blockEx, rows, nil
	}
	return cert, sum, blockEx, rows, nil
}

// blockScores scores n rows (n, d) against block l's space: their excess over its bound, and what
// a joint score sums for them (the excess, or with jointTopK their top-k containment).
func (a *attack) blockScores(l int, rows []float32, n int) (ex, rankBy []float64, err error) {
	sp := a.spaces[l]
	sc, err := sp.Score(toDense(rows, n, a.d))
	if err != nil {
		return nil, nil, fmt.Errorf("block %d: %w", l, err)
	}
	ex = a.excessOf(l, sc)
	if a.scoring != jointTopK {
		return ex, ex, nil
	}
	if rankBy, err = topKOf(sp, sc, a.orderTopK); err != nil {
		return nil, nil, fmt.Errorf("block %d: %w", l, err)
	}
	return ex, rankBy, nil
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
			// Each row's own bound: what the rank cut dropped weighs more on a short row.
			out[i] = math.Log10(max(sc.Residual[i], 1e-30) / sp.RowResidualBound(sc.Energy[i]))
		case sc.LeverageBound != nil:
			// Each row's own bound: a recomputation error moves a leverage by up to
			// rho ||x|| / sigma_min(U), so the bound grows with the row's norm.
			out[i] = math.Log10(max(sc.Leverage[i], 1e-30) / sc.LeverageBound[i])
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
