package content

import (
	"fmt"
	"math"
	"slices"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
)

// DeployerText is a text as an external deployer (bench/torch_deploy.py for decoders,
// bench/torch_bert_deploy.py for encoders) reads it: the token ids the store's forward pass reads,
// special tokens included and truncated as Embed truncates, and how many leading ones are the
// tokenizer's special prefix (a decoder's BOS, an encoder's [CLS]).
type DeployerText struct {
	Tokens []int32
	BOS    int
}

// DeployerTexts tokenizes texts as the store's pass does, for an external deployer to compute
// their rows from the very token ids the attack checks them against.
func (e *Embedder) DeployerTexts(texts []string) ([]DeployerText, error) {
	var prefix []int32
	if dec, ok := e.fwd.(*decoder); ok {
		p, err := dec.tok.Encode("", true)
		if err != nil {
			return nil, fmt.Errorf("content: the tokenizer's special prefix: %w", err)
		}
		prefix = int32s(p)
	}
	out := make([]DeployerText, len(texts))
	for i, t := range texts {
		ids, err := e.fwd.tokens(t)
		if err != nil {
			return nil, err
		}
		out[i].Tokens = ids
		switch {
		case e.fwd.causal():
			if len(ids) >= len(prefix) && slices.Equal(ids[:len(prefix)], prefix) {
				out[i].BOS = len(prefix) // as extraction.RunDecoder counts the rows it drops
			}
		case len(ids) > 0:
			out[i].BOS = 1 // [CLS]: wordpiece.Encode always opens with it
		}
	}
	return out, nil
}

// FromDeployer lays out rows an external deployer computed for texts as Embed lays out its own:
// rows(i, text) returns text i's rows at the store's layer and point, (len(text.Tokens), d), one per
// token of DeployerTexts' ids with the special tokens included, as the deployer computed them; the
// store's extraction then drops the special rows (where the store drops them: a decoder's BOS rows,
// keeping true positions; an encoder's [CLS] and [SEP], numbering the rest from 0 as extraction.Run
// does), RMS-normalises (where the store does) and rounds to the store's float16 (where it holds
// float16), as it did to the store's rows. The result is what Options.Deployer returns: victim v's
// rows at text v.
func (e *Embedder) FromDeployer(texts []string, rows func(i int, text DeployerText) ([]float32, error)) (*Rows, error) {
	in, err := e.DeployerTexts(texts)
	if err != nil {
		return nil, err
	}
	d := e.d
	r := &Rows{D: d, Off: []int{0}}
	sink := &collect{r}
	for i, t := range in {
		x, err := rows(i, t)
		if err != nil {
			return nil, err
		}
		n := len(t.Tokens)
		if len(x) != n*d {
			return nil, fmt.Errorf("content: text %d: the deployer gave %d values for %d tokens of width %d", i, len(x), n, d)
		}
		first, last, norm, truePos := e.deployerKept(t)
		if first >= last {
			return nil, fmt.Errorf("content: text %d: only its %d special tokens, no row the store keeps", i, n)
		}
		x = slices.Clone(x[first*d : last*d]) // (last - first, d)
		if norm == extraction.NormRMS {
			for j := 0; j < last-first; j++ {
				extraction.RMSNormalize(x[j*d:(j+1)*d], d)
			}
		}
		var pos []int32 // nil: 0, 1, ...
		if truePos {
			pos = make([]int32, last-first)
			for j := range pos {
				pos[j] = int32(first + j)
			}
		}
		if err := sink.AddTextAt(int64(i), texts[i], true, pos, t.Tokens[first:last], x, nil); err != nil {
			return nil, err
		}
		r.Tokens += int64(n)
	}
	if e.fp16 {
		store.RoundFloat16(r.Data)
	}
	return r, nil
}

// deployerKept says which of a deployer text's rows the store keeps, [first, last), how it
// normalises them, and whether they keep their true positions (a decoder's) or are numbered from 0
// (an encoder's, as extraction.Run stores them).
func (e *Embedder) deployerKept(t DeployerText) (first, last int, norm string, truePos bool) {
	n := len(t.Tokens)
	switch f := e.fwd.(type) {
	case *decoder:
		if f.opt.DropBOS {
			first = t.BOS
		}
		return first, n, f.opt.Norm, true
	case *encoder:
		if f.opt.DropSpecial {
			return 1, n - 1, f.opt.Norm, false // [CLS] ... [SEP]
		}
		return 0, n, f.opt.Norm, false
	}
	return 0, n, "", false
}

// int32s converts token ids to the int32 the rows record.
func int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// Gap is how far one set of rows lies from another of the same texts: the largest and the median
// relative row difference ||a - b|| / ||b|| over Rows rows.
type Gap struct {
	Max    float64 `json:"max"`
	Median float64 `json:"median"`
	Rows   int     `json:"rows"`
}

// sameLayout reports whether a and b hold rows of the same tokens at the same positions, the
// condition under which RowGap compares them.
func sameLayout(a, b *Rows) bool {
	if a.Len() != b.Len() || a.D != b.D || !slices.Equal(a.Off, b.Off) {
		return false
	}
	for i := range a.Pos {
		if !slices.Equal(a.Pos[i], b.Pos[i]) || !slices.Equal(a.IDs[i], b.IDs[i]) {
			return false
		}
	}
	return true
}

// RowGap compares a with b (the reference) row by row: both must hold the same texts' rows at the
// same positions.
func RowGap(a, b *Rows) (*Gap, error) {
	if a.Len() != b.Len() || a.D != b.D || !slices.Equal(a.Off, b.Off) {
		return nil, fmt.Errorf("rows of %d texts (width %d) against %d (width %d), or other row counts", a.Len(), a.D, b.Len(), b.D)
	}
	for i := range a.Pos {
		if !slices.Equal(a.Pos[i], b.Pos[i]) || !slices.Equal(a.IDs[i], b.IDs[i]) {
			return nil, fmt.Errorf("text %d: tokens %v at %v against %v at %v", i, a.IDs[i], a.Pos[i], b.IDs[i], b.Pos[i])
		}
	}
	d, n := a.D, b.Off[len(b.Off)-1]
	rel := make([]float64, n)
	for r := range rel {
		var diff, norm float64
		for c := 0; c < d; c++ {
			x, y := float64(a.Data[r*d+c]), float64(b.Data[r*d+c])
			diff += (x - y) * (x - y)
			norm += y * y
		}
		rel[r] = math.Sqrt(diff / max(norm, math.SmallestNonzeroFloat64))
	}
	return &Gap{Max: slices.Max(append([]float64{0}, rel...)), Median: quantile(rel, 0.5), Rows: n}, nil
}
