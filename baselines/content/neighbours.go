package content

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/gelo-research/geloattack/baselines/membership"
)

// DefaultNeighbourBudget is how many neighbours of a claimed candidate Run embeds and tests at
// most (Options.NeighbourBudget 0). A four-digit PIN has about 50 that are not themselves
// four-digit PINs, a date or a name more than the budget.
const DefaultNeighbourBudget = 200

// Alphabet returns the distinct characters of values, in increasing order: the characters a
// neighbour may put in (digits for PINs; letters, digits, ',' and ' ' for dates).
func Alphabet(values []string) []rune {
	seen := map[rune]bool{}
	for _, v := range values {
		for _, r := range v {
			seen[r] = true
		}
	}
	out := make([]rune, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// NeighbourSpec says which neighbours of a value Of returns.
type NeighbourSpec struct {
	// Alphabet is the characters substituted, appended and inserted (Alphabet of the candidates).
	Alphabet []rune
	// Budget is the most neighbours returned (<= 0: DefaultNeighbourBudget).
	Budget int
	// Key maps a value to what tells two values apart for the model (the token ids of the filled
	// template: an uncased tokenizer reads "Smith" and "smith" alike); nil: the value itself. Two
	// values of one key are one neighbour, and a value of the claimed value's own key is none.
	Key func(value string) string
	// Exclude reports keys not to return: those of the candidates that were scored already.
	Exclude func(key string) bool
}

// Of returns up to Budget distinct strings one edit from value that are not excluded, in a fixed
// order, those most like value first:
//
//  1. the proper prefixes, longest first ("047", "04", "0" for "0475");
//  2. value with one character appended ("04750" ... "04759"), characters of the last one's
//     class (digit, upper case, lower case, space, other) first;
//  3. value with one character deleted, left to right ("475", "075", "045");
//  4. one character substituted or inserted before a position: round by round over the
//     positions, each position's list holding its substitutions by characters of the class
//     there, then its insertions of the classes beside it, then the other characters, so that a
//     budget too small for all of them ("March 5, 1987" over the dates' 40-odd characters has
//     about 1,200) spreads over every position instead of spending itself on the first.
//
// Strings that are empty, start or end with white space or hold two white-space characters in a
// row are skipped (the tokenizer reads them as a trimmed or single-spaced string, generated too).
func (s NeighbourSpec) Of(value string) []string {
	budget := s.Budget
	if budget <= 0 {
		budget = DefaultNeighbourBudget
	}
	key := s.Key
	if key == nil {
		key = func(v string) string { return v }
	}
	seen := map[string]bool{key(value): true}
	var out []string
	add := func(v string) bool {
		if len(out) >= budget {
			return false
		}
		if !wellFormed(v) {
			return true
		}
		k := key(v)
		if seen[k] || (s.Exclude != nil && s.Exclude(k)) {
			return true
		}
		seen[k] = true
		out = append(out, v)
		return len(out) < budget
	}
	rs := []rune(value)
	for n := len(rs) - 1; n >= 1; n-- {
		if !add(string(rs[:n])) {
			return out
		}
	}
	var last rune
	if len(rs) > 0 {
		last = rs[len(rs)-1]
	}
	for _, a := range s.byClass(last, last) {
		if !add(value + string(a)) {
			return out
		}
	}
	for i := range rs {
		if !add(string(rs[:i]) + string(rs[i+1:])) {
			return out
		}
	}
	// Per position, its substitutions and insertions, most alike first.
	lists := make([][]string, len(rs))
	for i := range rs {
		var same, other []string
		for _, a := range s.Alphabet {
			if a == rs[i] {
				continue
			}
			v := string(rs[:i]) + string(a) + string(rs[i+1:])
			if CharClass(a) == CharClass(rs[i]) {
				same = append(same, v)
			} else {
				other = append(other, v)
			}
		}
		before := rs[i]
		if i > 0 {
			before = rs[i-1]
		}
		for _, a := range s.Alphabet {
			v := string(rs[:i]) + string(a) + string(rs[i:])
			if c := CharClass(a); c == CharClass(rs[i]) || c == CharClass(before) {
				same = append(same, v)
			} else {
				other = append(other, v)
			}
		}
		lists[i] = append(same, other...)
	}
	for r := 0; ; r++ {
		more := false
		for _, l := range lists {
			if r < len(l) {
				more = true
				if !add(l[r]) {
					return out
				}
			}
		}
		if !more {
			return out
		}
	}
}

// byClass returns the alphabet with the characters of the class of a or of b first, each part in
// increasing order.
func (s NeighbourSpec) byClass(a, b rune) []rune {
	var same, other []rune
	for _, r := range s.Alphabet {
		if c := CharClass(r); c == CharClass(a) || c == CharClass(b) {
			same = append(same, r)
		} else {
			other = append(other, r)
		}
	}
	return append(same, other...)
}

// CharClass is a character's kind for Of's order: digit, upper case, lower case, space or other
// (0 to 4). assess's look-alike secrets extend a secret by a character of its last one's kind.
func CharClass(r rune) int {
	switch {
	case unicode.IsDigit(r):
		return 0
	case unicode.IsUpper(r):
		return 1
	case unicode.IsLower(r):
		return 2
	case unicode.IsSpace(r):
		return 3
	}
	return 4
}

// wellFormed rejects the strings Of skips: empty, white space at either end or twice in a row.
func wellFormed(v string) bool {
	if v == "" || strings.TrimFunc(v, unicode.IsSpace) != v {
		return false
	}
	prev := false
	for _, r := range v {
		sp := unicode.IsSpace(r)
		if sp && prev {
			return false
		}
		prev = sp
	}
	return true
}

// NeighbourReport is what the neighbour test of a claim found.
type NeighbourReport struct {
	// Tested is how many neighbours were scored; Passing how many passed the residual test (their
	// score within the bound), any of which withdraws the claim.
	Tested  int `json:"tested"`
	Passing int `json:"passing"`
	// Closest is the best-scoring neighbour and Score its score (log10 outside fraction, the
	// primary score); Bound is log10 of the residual bound they were tested against.
	Closest string  `json:"closest,omitempty"`
	Score   float64 `json:"score"`
	Bound   float64 `json:"bound"`
}

// CheckNeighbours tests a claim against the neighbours of the claimed candidate: nb holds their
// rows, embedded exactly as the candidates' rows were (the same template, the same forward pass,
// SlotRows), and kind is the primary score the claim rests on. A claim stands only if every
// neighbour fails the residual test (its score beyond ms.ResidualBound()); if any passes, the data
// cannot tell the claimed candidate from a string the attacker did not list (a secret that is a
// prefix, an extension or a one-character variant of it), and the verdict becomes VerdictRanked.
// A decision that is not a claim is returned as it is. The bound is a theorem for the secret's
// rows (given rho and ResidualSafety's premise): if the secret is one of the neighbours, it passes
// and the claim is withdrawn; what remains a measured premise is only that strings further than
// one edit from the claim, and not candidates, do not pass either.
func CheckNeighbours(ms *membership.Space, dec Decision, nb *Candidates, kind Score) (Decision, error) {
	if dec.Verdict != VerdictClaim {
		return dec, nil
	}
	bound := math.Log10(ms.ResidualBound())
	rep := NeighbourReport{Score: math.Inf(1), Bound: bound}
	if nb != nil && nb.Len() > 0 {
		scores, err := nb.ScoreResidual(ms, []Score{kind})
		if err != nil {
			return dec, fmt.Errorf("content: neighbours: %w", err)
		}
		for i, v := range scores[0] {
			rep.Tested++
			if v <= bound {
				rep.Passing++
			}
			if v < rep.Score {
				rep.Score, rep.Closest = v, nb.Values[i]
			}
		}
	}
	if math.IsInf(rep.Score, 1) {
		rep.Score = 0 // no neighbour: keep the JSON finite
	}
	dec.Neighbours = rep
	if rep.Passing > 0 {
		dec.Verdict, dec.Withdrawn = VerdictRanked, true
	}
	return dec, nil
}

// neighbourhood tests Run's claims against the neighbours of the claimed candidate.
type neighbourhood struct {
	emb  *Embedder
	tmpl Template
	kind Score
	c    *Candidates
	spec NeighbourSpec
	// keys holds each candidate's TokenKey, count how many candidates share each key.
	keys  []string
	count map[string]int
}

// newNeighbourhood prepares the neighbour test of Run's claims: the alphabet of every candidate
// fill (with Options.Absent the removed secret's included: the experiment takes it out of the
// scores, not out of what the attacker knows the secrets to be made of) and the token keys of
// the candidates, which are scored already and so are no neighbours.
func newNeighbourhood(emb *Embedder, opt Options) *neighbourhood {
	c := opt.Candidates
	n := &neighbourhood{emb: emb, tmpl: opt.Template, kind: opt.Score, c: c, keys: make([]string, c.Len()), count: map[string]int{}}
	for i, t := range c.Texts {
		n.keys[i] = emb.TokenKey(t)
		n.count[n.keys[i]]++
	}
	n.spec = NeighbourSpec{
		Alphabet: Alphabet(c.Values),
		Budget:   opt.NeighbourBudget,
		Key:      func(v string) string { return emb.TokenKey(opt.Template.Fill(v)) },
	}
	return n
}

// check embeds the neighbours of dec's claimed candidate and runs CheckNeighbours. absent is the
// candidate removed from the scores (Options.Absent), -1 for none: a string of its key is a
// neighbour like any string the attacker did not score.
func (n *neighbourhood) check(ctx context.Context, ms *membership.Space, dec Decision, absent int) (Decision, error) {
	spec := n.spec
	spec.Exclude = func(k string) bool {
		m := n.count[k]
		if absent >= 0 && n.keys[absent] == k {
			m--
		}
		return m > 0
	}
	vals := spec.Of(n.c.Values[dec.Best])
	var nb *Candidates
	if len(vals) > 0 {
		var err error
		if nb, err = Embed(ctx, n.emb, n.tmpl, vals, nil); err != nil {
			return dec, fmt.Errorf("neighbours of %q: %w", n.c.Values[dec.Best], err)
		}
	}
	return CheckNeighbours(ms, dec, nb, n.kind)
}
