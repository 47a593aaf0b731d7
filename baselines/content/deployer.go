package content

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
)

// DeployerText is a text as an external deployer (bench/torch_deploy.py) reads it: the token ids
// the store's forward pass reads, special tokens included and truncated as Embed truncates, and
// how many leading ones are the tokenizer's special prefix (BOS).
type DeployerText struct {
	Tokens []int32
	BOS    int
}

// DeployerTexts tokenizes texts as the decoder store's pass does, for an external deployer to
// compute their rows from the very token ids the attack checks them against. An encoder store is
// refused: the external deployer runs Llama-family decoders only.
func (e *Embedder) DeployerTexts(texts []string) ([]DeployerText, error) {
	dec, ok := e.fwd.(*decoder)
	if !ok {
		return nil, errEncoderDeployer
	}
	prefix, err := dec.tok.Encode("", true)
	if err != nil {
		return nil, fmt.Errorf("content: the tokenizer's special prefix: %w", err)
	}
	out := make([]DeployerText, len(texts))
	for i, t := range texts {
		ids, err := dec.tokens(t)
		if err != nil {
			return nil, err
		}
		out[i].Tokens = ids
		if len(ids) >= len(prefix) && slices.Equal(ids[:len(prefix)], int32s(prefix)) {
			out[i].BOS = len(prefix) // as extraction.RunDecoder counts the rows it drops
		}
	}
	return out, nil
}

// errEncoderDeployer refuses an external deployer's rows for an encoder store.
var errEncoderDeployer = errors.New("content: an external deployer's rows are a decoder's (bench/torch_deploy.py runs Llama-family decoders); this store is an encoder's")

// FromDeployer lays out rows an external deployer computed for texts as Embed lays out its own:
// rows(i, text) returns text i's rows at the store's layer and point, (len(text.Tokens), d), one per
// token of DeployerTexts' ids with the special prefix included, as the deployer computed them; the
// store's extraction then drops the BOS rows (where the store drops them), RMS-normalises (where
// the store does) and rounds to the store's float16 (where it holds float16), as it did to the
// store's rows. The result is what Options.Deployer returns: victim v's rows at text v.
func (e *Embedder) FromDeployer(texts []string, rows func(i int, text DeployerText) ([]float32, error)) (*Rows, error) {
	dec, ok := e.fwd.(*decoder)
	if !ok {
		return nil, errEncoderDeployer
	}
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
		first := 0
		if dec.opt.DropBOS {
			first = t.BOS
		}
		if first >= n {
			return nil, fmt.Errorf("content: text %d: only its %d special tokens, no row the store keeps", i, n)
		}
		x = slices.Clone(x[first*d:]) // (n - first, d)
		if dec.opt.Norm == extraction.NormRMS {
			for j := 0; j < n-first; j++ {
				extraction.RMSNormalize(x[j*d:(j+1)*d], d)
			}
		}
		pos := make([]int32, n-first)
		for j := range pos {
			pos[j] = int32(first + j)
		}
		if err := sink.AddTextAt(int64(i), texts[i], true, pos, t.Tokens[first:], x, nil); err != nil {
			return nil, err
		}
		r.Tokens += int64(n)
	}
	if e.fp16 {
		store.RoundFloat16(r.Data)
	}
	return r, nil
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
