package decode

import (
	"math"
	"slices"
)

// The claim rule. A decoded text is claimed only as a proof from U: every alternative an attacker
// cannot refute from the observation forbids the claim. Besides the certification of each step
// and its lead over the best extension left out (stepLead, in certifiedSearch and rankSearch), that
// takes three rules:
//
//  1. A step is evidence only when its rows say something the rows already explained do not
//     (proves): a row within the certification bound of their span lies in rowspace(U) whether or
//     not the text goes on, so its passing the test proves nothing. The explained rows are the
//     text's own prefix and the other decoded texts' certified rows that do not presuppose this
//     step (decide). A step is not evidence either when another certified extension of the same
//     prefix proved nothing (step.ambiguous): the text may have gone on with that one, and its
//     continuations' rows lie within rounding of this step's own continuations.
//  2. The end of a text is a hypothesis like any step (endProven): claimed only when every
//     extension by one more bag token is refused by the margin a step's runner-up needs. A text
//     the search stopped reading (the step cap, the model's context) has an untested end.
//  3. The claims together must fit in U (rankExceeded).

// step is what a search keeps of one step of a text, for the claim rule.
type step struct {
	// rows are the step's rows at blocks 1..upto-1: ((upto-1) d).
	rows []float32
	// ex is its excess over the certification bound at each attacked block >= 1 (a.order).
	ex []float64
	// ambiguous says another certified extension of the same prefix proved nothing (rule 1).
	ambiguous bool
}

// LeftOutAbove is how far above the leverage bound (a factor) the best extension left out must
// lie for a step to count towards a claim when a block is past full rank: 2, as
// content.LeverageRunnerUp (below full rank, outside the residual bound is enough).
const LeftOutAbove = 2

// leftOutBound is the excess, in decades, that every extension left out of a step (and every
// extension of a text's end) needs for the step (the end) to count towards a claim: 0 below full
// rank, log10(LeftOutAbove) when any attacked block is past it.
func (a *attack) leftOutBound() float64 {
	for _, sp := range a.spaces {
		if sp.FullRank() {
			return math.Log10(LeftOutAbove)
		}
	}
	return 0
}

// certifiable says every attacked block offers an absolute test and the search had the whole bag.
// (Below full rank the test of U is membership.Space.RowResidualBound, which counts the
// directions the rank cut dropped, so a block that lost some to rounding still refuses soundly.)
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

// stepLead is a step's lead: how far the best extension left out (out, by ascending score) lies
// beyond the worst kept one, counted only when every extension left out is itself outside the
// certification bound (by LeftOutAbove past full rank): a choice between certified extensions
// proves nothing. With a joint score the best left out by score need not be the best by
// certification, so every one left out is checked. -Inf: the step proves nothing.
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

// residualBound is the certification bound at block l as a residual fraction: a row of X lies
// this close to rowspace(U_l) whatever the rounding. Every test of a row against a span (U_l's or
// the explained rows') goes through it, so a wider bound (e.g. the attacker's recomputed rows
// differing from the deployer's) is one change here.
func (a *attack) residualBound(l int) float64 {
	return a.spaces[l].ResidualBound()
}

// proves says whether a step's row at attacked block a.order[k] is evidence (rule 1), from its
// residual fraction res against the span of the explained rows (of dimension dim) and its excess
// ex over U's bound (decades).
//
// The alternative "nothing new" is scored like a runner-up: it must lie outside the bound and
// a.claimLead decades behind the step. Below full rank, were the step's rows not in X, the part of
// them outside the explained span would still fall in rowspace(U) by chance, a fraction
// (rank - dim)/(d - dim) of it for a direction at random (the other texts' rows and the shields):
// the expected excess of "nothing new" is the span's excess plus log10 of what chance leaves,
// (d - rank)/(d - dim). Past full rank U's residual says nothing and the leverage cannot be
// compared with a residual: the step's rows must then lie a.claimLead decades beyond the bound
// from the explained span.
func (a *attack) proves(k int, res float64, dim int, ex float64) bool {
	l := a.order[k]
	sp := a.spaces[l]
	spanEx := math.Log10(max(res, 1e-300) / a.residualBound(l))
	if sp.FullRank() {
		return spanEx >= a.claimLead
	}
	if dim >= a.d {
		return false
	}
	left := min(1, float64(a.d-sp.Rank())/float64(a.d-dim))
	null := spanEx + math.Log10(left)
	return null > 0 && null-ex >= a.claimLead
}

// blockRow is the row at attacked block a.order[k] of a step's rows ((upto-1) d): (d).
func (a *attack) blockRow(rows []float32, k int) []float32 {
	l := a.order[k]
	return rows[(l-1)*a.d : l*a.d]
}

// provesAnywhere says a step's rows are evidence at some attacked block against spans (one per
// attacked block): one block whose U holds a row nothing explained suffices, as one block's
// refusal suffices to refuse.
func (a *attack) provesAnywhere(spans []*span, rows []float32, ex []float64) bool {
	for k := range a.order {
		res := spans[k].residual(a.blockRow(rows, k))
		if a.proves(k, res, spans[k].dim(), ex[k]) {
			return true
		}
	}
	return false
}

// ownSpans are, per attacked block, the span of a prefix's own rows.
func (a *attack) ownSpans(hist []step) []*span {
	spans := make([]*span, len(a.order))
	for k := range spans {
		spans[k] = newSpan(a.d)
		for _, s := range hist {
			spans[k].add(a.blockRow(s.rows, k))
		}
	}
	return spans
}

// ambiguity is, for each extension in kept, whether another certified extension of nd (cert[i] <=
// 0) proves nothing against nd's own rows (rule 1): "nd, that token, then this one" gives rows
// within rounding of "nd, this one", so the observation cannot tell the texts apart. Extensions
// repeating a prefix row exactly (+Inf) are left aside: that takes a token repeated from the start
// ("A A" attends to identical keys and values), the search never reads past such a repeat, so nd
// is then the one token "A", and "A A t" weighs A twice as "A t" does: rows apart by far more
// than rounding, which U refutes or confirms by itself.
func (a *attack) ambiguity(nd node, e *extensions, kept []int) []bool {
	var spans []*span
	var vacuous []int // the certified extensions proving nothing
	for _, i := range kept {
		if !(e.cert[i] <= 0) {
			continue
		}
		if spans == nil {
			spans = a.ownSpans(nd.hist)
		}
		if !a.provesAnywhere(spans, e.row(i), e.ex(i)) {
			vacuous = append(vacuous, i)
		}
	}
	out := make([]bool, len(kept))
	for j, i := range kept {
		out[j] = len(vacuous) > 1 || (len(vacuous) == 1 && vacuous[0] != i)
	}
	return out
}

// endProven says the end of nd is proven (rule 2): every extension by one more bag token, those
// repeating a row of the prefix included, lies outside the bound (by LeftOutAbove past full
// rank) and a.claimLead decades behind the text's worst step.
func (a *attack) endProven(nd node, e *extensions) bool {
	if len(nd.toks) == 0 {
		return false
	}
	for i := range e.rawCert {
		if !(e.rawCert[i] > a.leftOutThr) || !(e.rawScore[i]-nd.worst >= a.claimLead) {
			return false
		}
	}
	return true
}

// decide sets Claimed and Unproven of the texts a search decoded and says whether the claims were
// withdrawn for outnumbering what U holds (rule 3). A text is claimed when every attacked block
// offers an absolute test and the search had the whole bag, its end is proven, every step was
// certified, led the best extension left out by claimLead decades, and proves something.
//
// Rule 1 at the batch: step k of text T is tested against its own rows before k and the
// certified rows of every other decoded text T' that does not start with T's first k+1 tokens,
// from where T' leaves T: those rows are in U under any reading, while the rows of a text that
// starts with T[:k+1] presuppose the step. Where another text explains the step, the observation
// cannot tell whether T goes on or that text holds the rows.
func (a *attack) decide(texts []Text, nObs int) bool {
	cand := make([]bool, len(texts))
	for i, t := range texts {
		cand[i] = !t.Open && t.Excess <= 0 && t.Lead >= a.claimLead && a.certifiable()
		texts[i].Claimed = false
	}
	for i := range texts {
		if cand[i] {
			texts[i].Unproven = a.unproven(texts, i)
			cand[i] = texts[i].Unproven == 0
		}
	}
	if a.rankExceeded(texts, cand, nObs) {
		return true
	}
	for i := range texts {
		texts[i].Claimed = cand[i]
	}
	return false
}

// unproven counts the steps of texts[i] that prove nothing: ambiguous ones, and those within the
// bound of the span of the rows explained before them (decide).
func (a *attack) unproven(texts []Text, i int) int {
	t := texts[i]
	spans := make([]*span, len(a.order))
	for k := range spans {
		spans[k] = newSpan(a.d)
	}
	// byLCP[p]: the other texts leaving t at position p (their first p tokens are t's).
	byLCP := map[int][]int{}
	for j, o := range texts {
		if j != i {
			p := lcp(t.Tokens, o.Tokens)
			byLCP[p] = append(byLCP[p], j)
		}
	}
	n := 0
	for pos, s := range t.hist {
		for _, j := range byLCP[pos] {
			for _, os := range texts[j].hist[pos:] {
				for k := range spans {
					if os.ex[k] <= 0 { // only rows U holds explain anything
						spans[k].add(a.blockRow(os.rows, k))
					}
				}
			}
		}
		if s.ambiguous || !a.provesAnywhere(spans, s.rows, s.ex) {
			n++
		}
		for k := range spans {
			spans[k].add(a.blockRow(s.rows, k))
		}
	}
	return n
}

// rankExceeded says the texts marked in cand cannot all be true (rule 3), since U cannot hold
// their rows:
//
//   - at each attacked block l >= 1, their distinct rows, counted at the certification bound (a
//     row within the bound of the span of the rows counted before it is not counted again: X may
//     repeat a row, "A A" from the start, or repeat one to rounding, and rank(U_l) counts neither
//     twice), span rank(U_l) dimensions at most, since rowspace(X_l) lies in rowspace(U_l) = the
//     row space of [X_l; S_l]. Rows the claimed texts share (a common prefix) are one row: the
//     row of a prefix depends on that prefix alone. Below full rank the shields take some of that
//     rank too; the rule does not count on knowing how many;
//   - with every row observed, each claimed text is a text of the batch whose every token is a
//     row of U: their lengths sum to at most n_obs (texts sharing a prefix each hold its rows).
//
// Either excess means some claim is wrong without saying which: all are withdrawn.
func (a *attack) rankExceeded(texts []Text, cand []bool, nObs int) bool {
	total := 0
	rows := map[string][]float32{} // distinct claimed prefixes' rows
	var keys []string              // in the texts' order: the greedy count must not follow map order
	for i, t := range texts {
		if !cand[i] {
			continue
		}
		total += len(t.Tokens)
		for pos, s := range t.hist {
			key := prefixKey(t.Tokens[:pos+1])
			if _, ok := rows[key]; !ok {
				rows[key] = s.rows
				keys = append(keys, key)
			}
		}
	}
	if a.allObserved && total > nObs {
		return true
	}
	for k, l := range a.order {
		sp := newSpan(a.d)
		count := 0
		for _, key := range keys {
			x := a.blockRow(rows[key], k)
			if sp.residual(x) > a.residualBound(l) {
				count++
				sp.add(x)
			}
		}
		if count > a.spaces[l].Rank() {
			return true
		}
	}
	return false
}

// prefixKey names a token prefix.
func prefixKey(toks []int) string {
	b := make([]byte, 0, 4*len(toks))
	for _, v := range toks {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return string(b)
}

// lcp is the length of the common prefix of x and y.
func lcp(x, y []int) int {
	n := 0
	for n < len(x) && n < len(y) && x[n] == y[n] {
		n++
	}
	return n
}

// tally counts the claimed texts and the right ones by a one-to-one matching (rule 4): each claimed
// text is matched to at most one true text equal to it and each true text to at most one claimed
// text, so two claimed copies of one text count one right claim and one wrong, and a claimed text
// equal to no true text is wrong.
func tally(decoded []Text, truth [][]int) (claims, right int) {
	used := make([]bool, len(truth))
	for _, t := range decoded {
		if !t.Claimed {
			continue
		}
		claims++
		for j, u := range truth {
			if !used[j] && slices.Equal(t.Tokens, u) {
				used[j] = true
				right++
				break
			}
		}
	}
	return claims, right
}

// span is an orthonormal basis, in float64, of the rows added so far: residuals of a few rows
// against the span of a text's prefix, where U's own row space (membership) is not the question.
type span struct {
	d int
	q [][]float64 // (dim, d)
}

// spanTiny is the residual fraction below which a row adds no direction: float32 rows projected
// in float64 keep about 1e-16 of their norm, so a smaller residual is the arithmetic's.
const spanTiny = 1e-24

func newSpan(d int) *span { return &span{d: d} }

// dim is the span's dimension.
func (s *span) dim() int { return len(s.q) }

// project is x's component outside the span, x (d) in float32, and x's squared norm. Two passes
// of Gram-Schmidt: one leaves the round-off of nearly contained rows, the second removes it.
func (s *span) project(x []float32) ([]float64, float64) {
	r := make([]float64, s.d)
	norm := 0.0
	for i, v := range x {
		r[i] = float64(v)
		norm += r[i] * r[i]
	}
	for pass := 0; pass < 2; pass++ {
		for _, q := range s.q {
			c := 0.0
			for i, v := range q {
				c += v * r[i]
			}
			for i, v := range q {
				r[i] -= c * v
			}
		}
	}
	return r, norm
}

// residual is the fraction of x's energy outside the span (1 for a zero row: nothing explains it).
func (s *span) residual(x []float32) float64 {
	r, norm := s.project(x)
	if norm == 0 {
		return 1
	}
	out := 0.0
	for _, v := range r {
		out += v * v
	}
	return min(1, out/norm)
}

// add puts x's direction outside the span into it, unless x already lies in it to round-off.
func (s *span) add(x []float32) {
	if len(s.q) >= s.d {
		return
	}
	r, norm := s.project(x)
	e := 0.0
	for _, v := range r {
		e += v * v
	}
	if norm == 0 || e <= spanTiny*norm {
		return
	}
	inv := 1 / math.Sqrt(e)
	for i := range r {
		r[i] *= inv
	}
	s.q = append(s.q, r)
}
