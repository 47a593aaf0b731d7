package decode

import (
	"context"
	"math"
	"slices"
)

// RankStop is the jump, in decades over the median of a prefix's steps, beyond which the ranking
// search calls an extension a miss: the true continuation scores like the steps before it, and
// once a text has ended every extension is wrong.
const RankStop = 1

// rankSearch reads texts by ranking alone (Options.Rank), where certification fails: rows dropped
// (obs_rows < 1) and margins that rounding leaves thin. budget is Options.RankBag (0: no cut).
// Texts are claimed by the rule of certifiedSearch (every step certified, the end proven), so
// dropped rows give none.
type rankSearch struct{ budget int }

// bag is the certified bag where block 0's test is sound (every row observed) and certifies
// something: a true token always passes it, so nothing true is lost and the search is not swamped
// (past full rank at d = 4096 the n_obs best would be thousands of tokens); otherwise the n_obs
// best-scoring vocabulary tokens. Then only the budget's best are kept, and cut says some were not.
func (r rankSearch) bag(a *attack, scores []float64, nObs int) ([]int, bool) {
	bag := certifiedBag(scores, nObs)
	if len(bag) == 0 || !a.allObserved || !a.certifiable() {
		bag = rankBag(scores, nObs)
	}
	if r.budget > 0 && len(bag) > r.budget {
		return bag[:r.budget], true
	}
	return bag, false
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

// rankEnds are the ranking search's finished texts, each token sequence once (a text may end both
// at a miss and when its cut-back reading ends).
type rankEnds struct {
	seen  map[string]bool
	texts []Text
}

// finish records n as a text. proven says its end is (endProven); a text cut back before a
// pending miss, whose own end was never tested, is open.
func (r *rankEnds) finish(n rankNode, proven bool) {
	nd := n.node
	if n.pending {
		nd, proven = *n.prev, false
	}
	key := prefixKey(nd.toks)
	if len(nd.toks) == 0 || r.seen[key] {
		return
	}
	r.seen[key] = true
	r.texts = append(r.texts, nd.text(!proven))
}

// read reads texts from the bag by ranking alone. Each prefix keeps its best extensions (within
// branch decades of the best); an extension scoring more than RankStop decades above the median
// of the prefix's steps is a miss, which a text may make once in a row (a row the deployer
// dropped from U, or a step rounding blurred) and not twice: a prefix whose best extension is a
// second miss in a row ends as the text before the first. The beam keeps the prefixes of the best
// mean step score.
func (rankSearch) read(ctx context.Context, a *attack, bag []int, nObs int) ([]Text, error) {
	if len(bag) == 0 {
		return nil, nil
	}
	live := []rankNode{{node: a.root()}}
	ends := &rankEnds{seen: map[string]bool{}}
	for step := 0; step < a.steps(nObs) && len(live) > 0; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a.report("step %d of at most %d: %d live prefixes, %d texts done", step+1, a.steps(nObs), len(live), len(ends.texts))
		var next []rankNode
		nodes := make([]node, len(live))
		for i, nd := range live {
			nodes[i] = nd.node
		}
		err := a.eachExtensions(nodes, bag, func(i int, e *extensions) error {
			next = append(next, a.rankStep(live[i], e, bag, ends)...)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if live, err = survive(next, a.beam, (*rankNode).key); err != nil {
			return nil, err
		}
	}
	for _, nd := range live { // the search stopped reading them: their end is not tested
		ends.finish(nd, false)
	}
	return ends.texts, nil
}

// rankStep is one prefix's step of the ranking search, from its extensions e (by bag token): the
// extensions kept, each marked a miss or not; a prefix that ends here (nothing left to extend by,
// a second miss in a row) or may end here (a first miss) is recorded in ends.
func (a *attack) rankStep(nd rankNode, e *extensions, bag []int, ends *rankEnds) []rankNode {
	best := e.score[e.order[0]]
	if math.IsInf(best, 1) {
		ends.finish(nd, a.endProven(nd.node, e))
		return nil
	}
	thr := nd.median() + RankStop
	miss := len(nd.steps) > 0 && best > thr
	if miss && nd.pending {
		ends.finish(nd, false)
		return nil
	}
	if miss {
		// The text may end here, or a row of it was lost: keep both readings.
		ends.finish(nd, a.endProven(nd.node, e))
	}
	kept := 0
	for kept < len(e.order) && !math.IsInf(e.score[e.order[kept]], 1) && e.score[e.order[kept]] <= best+a.branch {
		kept++
	}
	lead := a.stepLead(e, e.score[e.order[kept-1]], e.order[kept:])
	amb := a.ambiguities(nd.node, e, e.order[:kept], lead)
	parent := nd.node
	parent.p, parent.parent = nil, nil // a text cut back needs no model state
	kids := make([]rankNode, 0, kept)
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
		kids = append(kids, c)
	}
	return kids
}
