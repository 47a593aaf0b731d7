package decode

import (
	"math"
	"slices"
)

// The order margin is an evaluation figure: it walks the true texts, which the attack never
// sees, and costs about as many candidate passes as the search (Options.NoOrderMargin skips it).

// orderMargin is, along every true text, the best wrong extension's score minus the true next
// token's, the smallest over steps and texts (decades; > 0: the order is separable), scored as the
// search ranks extensions (a.scoring). Wrong extensions that repeat a row of the true prefix are
// left out, as the search leaves them out.
func (a *attack) orderMargin(truth [][]int, bag []int) (float64, error) {
	margin := math.Inf(1)
	for _, t := range truth {
		m, err := a.textMargin(t, truth, bag)
		if err != nil {
			return 0, err
		}
		margin = min(margin, m)
	}
	return margin, nil
}

// textMargin is orderMargin along one true text t: at each position the bag and t's own tokens
// are tried after t's prefix, and a token is wrong when it continues no true text of that prefix.
func (a *attack) textMargin(t []int, truth [][]int, bag []int) (float64, error) {
	cands := slices.Clone(bag)
	for _, v := range t {
		if !slices.Contains(cands, v) {
			cands = append(cands, v)
		}
	}
	w := (a.upto - 1) * a.d
	margin := math.Inf(1)
	p := a.m.NewPrefix()
	var seen [][]float32 // the true prefix's rows, each ((upto-1) d)
	for pos, v := range t {
		right := map[int]bool{} // tokens that continue some true text with this prefix are not wrong
		for _, o := range truth {
			if len(o) > pos && slices.Equal(o[:pos], t[:pos]) {
				right[o[pos]] = true
			}
		}
		_, score, _, rows, err := a.extend(p, cands) // rows: (cands, upto-1, d)
		if err != nil {
			return 0, err
		}
		truthScore, wrong := 0.0, math.Inf(1)
		var truthRows []float32
		for i, c := range cands {
			r := rows[i*w : (i+1)*w]
			if c == v {
				truthScore, truthRows = score[i], r
				continue
			}
			if !right[c] && !slices.ContainsFunc(seen, func(prev []float32) bool { return sameRows(r, prev) }) {
				wrong = min(wrong, score[i])
			}
		}
		margin = min(margin, wrong-truthScore)
		seen = append(seen, truthRows)
		if p, err = p.Append(v); err != nil {
			return 0, err
		}
	}
	return margin, nil
}
