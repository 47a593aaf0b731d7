package decode

import (
	"context"
	"slices"
)

// certifiedSearch is the default order search: a prefix is extended only by certified
// extensions (every attacked block's excess <= 0), and a prefix with none is a finished text.
type certifiedSearch struct{}

// bag is the certified bag: the certified search has nothing to gain from an uncertified token.
func (certifiedSearch) bag(_ *attack, scores []float64, nObs int) ([]int, bool) {
	return certifiedBag(scores, nObs), false
}

// read reads texts from the bag: prefixes extended by every bag token, keeping per prefix the
// certified extensions within branch decades of its best; a prefix with no certified extension
// is a finished text. At most a.steps(nObs) steps (every token of a text is an observed row).
func (certifiedSearch) read(ctx context.Context, a *attack, bag []int, nObs int) ([]Text, error) {
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
		err := a.eachExtensions(live, bag, func(i int, e *extensions) error {
			kids, end, rej := a.certifiedStep(live[i], e, bag)
			next, rejected = append(next, kids...), rejected || rej
			if end != nil {
				done = append(done, *end)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if live, err = survive(next, a.beam, func(n *node) float64 { return n.excess }); err != nil {
			return nil, err
		}
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

// ExplainedFloor is the score, in decades of the recomputation bound, below which the certified
// search's branch treats extensions as equally explained (1% of the bound).
const ExplainedFloor = -2

// certifiedStep is one prefix's step of the certified search, from its extensions e (by bag
// token): the extensions kept (certified, within branch decades of the best), or, when none is
// certified, the text nd ends as (nil for the empty prefix); rejected says some extension was not
// certified.
func (a *attack) certifiedStep(nd node, e *extensions, bag []int) (kids []node, end *Text, rejected bool) {
	certified := func(i int) bool { return e.cert[i] <= 0 }
	rejected = slices.ContainsFunc(e.order, func(i int) bool { return !certified(i) })
	first := slices.IndexFunc(e.order, certified)
	if first < 0 {
		if len(nd.toks) > 0 {
			t := nd.text(!a.endProven(nd, e))
			end = &t
		}
		return nil, end, rejected
	}
	// Scores below ExplainedFloor are equal here: the recomputation bound is a worst case, and how
	// far below it a true extension's rows fall is rounding noise that moves by decades with the
	// BLAS kernel (true continuations at -4.2 and -2.4 decades on one batch), so the branch must
	// not cut one true extension for lying nearer the bound than another.
	level := func(i int) float64 { return max(e.score[i], ExplainedFloor) }
	best := level(e.order[first])
	var kept, out []int // kept: certified within branch of the best; out: the rest
	for _, i := range e.order {
		if certified(i) && level(i) <= best+a.branch {
			kept = append(kept, i)
		} else {
			out = append(out, i)
		}
	}
	lead := a.stepLead(e, e.score[kept[len(kept)-1]], out)
	amb := a.ambiguities(nd, e, kept, lead)
	for j, i := range kept {
		kids = append(kids, nd.child(e, i, bag[i], lead, amb[j]))
	}
	return kids, end, rejected
}
