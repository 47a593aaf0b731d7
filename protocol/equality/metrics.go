package equality

import "math"

// Metrics compares the outputs of one run with a reference run over the same texts. Texts whose
// output holds a NaN or an infinity are counted in NonFinite and left out of every other figure
// (a nearest neighbour of such a text counts as changed).
type Metrics struct {
	// NNEqual is the fraction of texts whose nearest neighbour (highest cosine of sentence
	// embeddings among the other texts, within each run) is the same as in the reference run.
	NNEqual float64
	// CosMean and CosMin are the mean and smallest cosine between a text's sentence embedding and
	// the reference one.
	CosMean, CosMin float64
	// EmbL2 is the mean L2 distance between a text's sentence embedding and the reference one
	// (both have unit norm).
	EmbL2 float64
	// HiddenMaxAbs is the largest absolute difference of any final-layer hidden-state element.
	HiddenMaxAbs float64
	// HiddenRelL2 is the mean over tokens of ||h - h_ref|| / ||h_ref|| (final-layer rows).
	HiddenRelL2 float64
	// NonFinite counts texts whose final hidden states or embedding are not all finite.
	NonFinite int
}

// acc accumulates Metrics text by text; the nearest-neighbour figure is set at the end.
type acc struct {
	maxAbs, sumRel, sumCos, minCos, sumL2 float64
	tokens, texts, nonFinite              int
}

func newAcc() *acc { return &acc{minCos: math.Inf(1)} }

// add compares one text: hidden and ref (t, h), emb and refEmb (h).
func (a *acc) add(hidden, ref, emb, refEmb []float32, h int) {
	if !finite(hidden) || !finite(emb) {
		a.nonFinite++
		return
	}
	for r := 0; r+h <= len(hidden); r += h {
		var num, den float64
		for j, v := range hidden[r : r+h] {
			d := float64(v) - float64(ref[r+j])
			a.maxAbs = max(a.maxAbs, math.Abs(d))
			num += d * d
			den += float64(ref[r+j]) * float64(ref[r+j])
		}
		a.sumRel += math.Sqrt(num / den)
		a.tokens++
	}
	c := cosine(emb, refEmb)
	a.sumCos += c
	a.minCos = min(a.minCos, c)
	var l2 float64
	for j, v := range emb {
		d := float64(v) - float64(refEmb[j])
		l2 += d * d
	}
	a.sumL2 += math.Sqrt(l2)
	a.texts++
}

// metrics finishes the figures; nnEqual is computed separately over the whole set.
func (a *acc) metrics(nnEqual float64) Metrics {
	m := Metrics{NNEqual: nnEqual, HiddenMaxAbs: a.maxAbs, NonFinite: a.nonFinite,
		CosMean: math.NaN(), CosMin: math.NaN(), EmbL2: math.NaN(), HiddenRelL2: math.NaN()}
	if a.texts > 0 {
		m.CosMean, m.CosMin, m.EmbL2 = a.sumCos/float64(a.texts), a.minCos, a.sumL2/float64(a.texts)
		m.HiddenRelL2 = a.sumRel / float64(a.tokens)
	}
	return m
}

// finite reports whether every element of x is finite.
func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// cosine is the cosine of the angle between a and b, accumulated in float64.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i, v := range a {
		ab += float64(v) * float64(b[i])
		aa += float64(v) * float64(v)
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// nearest returns, for each of the nt rows of embs (nt, h), the index of the other row with the
// highest cosine (the first on ties), or -1 for a non-finite row; non-finite rows are never
// chosen.
func nearest(embs []float32, nt, h int) []int {
	ok := make([]bool, nt)
	for i := range ok {
		ok[i] = finite(embs[i*h : (i+1)*h])
	}
	out := make([]int, nt)
	for i := 0; i < nt; i++ {
		out[i] = -1
		if !ok[i] {
			continue
		}
		best := math.Inf(-1)
		for j := 0; j < nt; j++ {
			if j == i || !ok[j] {
				continue
			}
			if c := cosine(embs[i*h:(i+1)*h], embs[j*h:(j+1)*h]); c > best {
				best, out[i] = c, j
			}
		}
	}
	return out
}

// nnEqual is the fraction of texts whose neighbour in got equals the one in ref; a text that has
// none in got (non-finite) counts as changed.
func nnEqual(got, ref []int) float64 {
	same := 0
	for i, g := range got {
		if g >= 0 && g == ref[i] {
			same++
		}
	}
	return float64(same) / float64(len(got))
}

// norm is the Euclidean norm of x, accumulated in float64.
func norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}
