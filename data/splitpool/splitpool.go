// Package splitpool is the one place where an attack draws from a split beyond the example at
// hand: the candidate texts of a batch (its positives plus extra negative texts, SPEC §5) and
// random token rows of other texts (the unmix metric's distractors and the random-rows
// prediction, SPEC §6, and the classical baselines' random rows, SPEC §7). Training, the task
// evaluators and the baselines all draw here, so one rule holds for each kind of draw:
//
//   - Extra negative texts (ExtraTexts): k distinct texts of the split outside the batch's
//     positive texts, the first k of a seeded shuffle of those texts in split order (all of them
//     when there are fewer). Never a positive, never the same text twice.
//   - Random rows (Rows): a seeded pool of distinct rows of the split's texts, built once
//     (NewRows); each draw (Rows.Draw) takes distinct pool rows outside the example's texts
//     (Rows.Outside), centred by the example's own centring mean so that a draw is comparable
//     with the example's clean rows H.
//
// Callers own their seeds (each derives a stream from its run seed and what it draws for), so a
// resumed run or a re-run repeats every draw. The package imports only data and internal/sample:
// the baselines use it without linking the model or the training loop.
package splitpool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/internal/sample"
)

// Candidates builds the in-batch candidate set of SPEC §5 over corpus text indices: the union of
// every example's positive texts in order of first appearance, then the extra texts that are not
// already candidates (an extra that is some example's positive stays that one candidate, not a
// second copy). pos[b] lists the candidate indices of example b's positives. cands: (C).
func Candidates(positives [][]int, extra []int) (cands []int, pos [][]int, err error) {
	index := make(map[int]int)
	pos = make([][]int, len(positives))
	for b, ps := range positives {
		if len(ps) == 0 {
			return nil, nil, fmt.Errorf("splitpool: example %d has no positive texts", b)
		}
		pos[b] = make([]int, len(ps))
		for j, ti := range ps {
			c, ok := index[ti]
			if !ok {
				c = len(cands)
				index[ti] = c
				cands = append(cands, ti)
			}
			// A repeated positive would count twice in the InfoNCE numerator and the mass.
			if slices.Contains(pos[b][:j], c) {
				return nil, nil, fmt.Errorf("splitpool: example %d lists positive text %d twice", b, ti)
			}
			pos[b][j] = c
		}
	}
	for _, ti := range extra {
		if _, ok := index[ti]; !ok {
			index[ti] = len(cands)
			cands = append(cands, ti)
		}
	}
	return cands, pos, nil
}

// ExtraTexts draws the extra negative texts of one candidate set: k distinct texts of texts (a
// split's corpus indices, in split order) outside exclude (the batch's positives), the first k of
// an rng shuffle of those texts, or all of them when fewer than k remain. The shuffle consumes
// rng identically for the same texts and exclusions, so a seeded stream repeats its draw.
func ExtraTexts(rng *rand.Rand, texts, exclude []int, k int) []int {
	if k <= 0 {
		return nil
	}
	skip := make(map[int]bool, len(exclude))
	for _, ti := range exclude {
		skip[ti] = true
	}
	free := make([]int, 0, len(texts))
	for _, ti := range texts {
		if !skip[ti] {
			free = append(free, ti)
		}
	}
	rng.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	return free[:min(k, len(free))]
}

// DefaultRows is the default size of a split's row pool: enough distinct rows that the draws for
// different targets rarely repeat, small enough (32 MiB at d = 4096) to hold for both splits.
const DefaultRows = 2048

// RowsSeed derives a split's row-pool seed from a run seed, so the tasks and the baselines of one
// seed draw from the same pool of each split.
func RowsSeed(seed uint64, split data.Split) uint64 { return seed ^ 0x706f6f6c ^ uint64(split)<<56 }

// Rows is a seeded pool of distinct token rows of one split's texts, with the text each row
// comes from. It is read-only once built; Draw's randomness comes from the caller's stream.
type Rows struct {
	d    int
	rows []float32 // (P, d)
	text []int64   // (P): the text id of each row
}

// NewRows draws size distinct rows uniformly from all rows of texts (all of them when there are no
// more), kept in corpus order, from a stream seeded by seed.
func NewRows(c data.Corpus, texts []int, size int, seed uint64) (*Rows, error) {
	if size < 1 {
		return nil, fmt.Errorf("splitpool: pool size %d, want >= 1", size)
	}
	start := make([]int, len(texts)+1) // start[i]: global index of the first row of texts[i]
	for i, ti := range texts {
		start[i+1] = start[i] + c.NumTokens(ti)
	}
	total := start[len(texts)]
	if total == 0 {
		return nil, fmt.Errorf("splitpool: the split has no rows")
	}
	var picks []int
	if total <= size {
		picks = make([]int, total)
		for i := range picks {
			picks[i] = i
		}
	} else {
		picks = sample.Distinct(rand.New(rand.NewPCG(seed, 0x64697374)), total, size)
		slices.Sort(picks)
	}
	d := c.D()
	p := &Rows{d: d, rows: make([]float32, len(picks)*d), text: make([]int64, len(picks))}
	for r, g := range picks {
		i := sort.SearchInts(start, g+1) - 1 // the text holding global row g
		if err := c.Rows(texts[i], g-start[i], 1, p.rows[r*d:(r+1)*d]); err != nil {
			return nil, fmt.Errorf("splitpool: row %d of text %d: %w", g-start[i], c.TextID(texts[i]), err)
		}
		p.text[r] = c.TextID(texts[i])
	}
	return p, nil
}

// D is the width of the pool's rows.
func (p *Rows) D() int { return p.d }

// Len is the number of rows in the pool.
func (p *Rows) Len() int { return len(p.text) }

// Row is pool row r and the id of the text it comes from. row: (d), not to be modified.
func (p *Rows) Row(r int) (row []float32, textID int64) {
	return p.rows[r*p.d : (r+1)*p.d], p.text[r]
}

// Outside lists the pool rows whose text is not one of textIDs (an example's positive texts), the
// rows a draw for that example may take.
func (p *Rows) Outside(textIDs []int64) []int {
	out := make([]int, 0, len(p.text))
	for r, id := range p.text {
		if !slices.Contains(textIDs, id) {
			out = append(out, r)
		}
	}
	return out
}

// Draw fills the rows of dst with distinct pool rows from allowed (see Outside), chosen with rng,
// minus center when not nil. The subtraction is done in float32, as the sampler centres H, so a
// drawn row equal to a clean row stays bit-identical to it. dst: (k, d), k <= len(allowed).
func (p *Rows) Draw(rng *rand.Rand, allowed []int, center []float32, dst *mat.Dense) error {
	k, d := dst.Dims()
	if d != p.d {
		return fmt.Errorf("splitpool: rows of width %d wanted from a pool of width %d", d, p.d)
	}
	if center != nil && len(center) != d {
		return fmt.Errorf("splitpool: centring mean of width %d for rows of width %d", len(center), d)
	}
	if k > len(allowed) {
		return fmt.Errorf("splitpool: %d rows wanted, the pool has %d rows outside the example's texts (raise the pool size or the corpus)", k, len(allowed))
	}
	for i, a := range sample.Distinct(rng, len(allowed), k) {
		src, row := p.rows[allowed[a]*d:(allowed[a]+1)*d], dst.RawRowView(i)
		for j, v := range src {
			if center != nil {
				v -= center[j]
			}
			row[j] = float64(v)
		}
	}
	return nil
}
