package content

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
)

// Score says how a candidate's per-row residual fractions become one score. Every score is
// log10 of an outside fraction in [1e-30, 1]: lower means better contained in rowspace(U_obs).
type Score int

const (
	// SlotWorst is the largest residual fraction over the candidate's secret rows (SlotRows): the
	// secret must put every one of its own rows inside the row space. The default (see
	// docs/content-recovery.md for the measurements that chose it).
	SlotWorst Score = iota
	// SlotEnergy is the energy-weighted residual fraction over the secret rows.
	SlotEnergy
	// Worst is the largest residual fraction over all the candidate's rows.
	Worst
	// Energy is the energy-weighted residual fraction over all rows (the rowspace baseline's).
	Energy
	// BestRow is the smallest residual fraction of any row: fooled by the [CLS] rows, which are
	// nearly identical across texts at early layers (kept as the cautionary comparison).
	BestRow
)

// Scores lists every score, in the order of the constants.
var Scores = []Score{SlotWorst, SlotEnergy, Worst, Energy, BestRow}

// String names the score as flags spell it.
func (s Score) String() string {
	switch s {
	case SlotWorst:
		return "slot_worst"
	case SlotEnergy:
		return "slot_energy"
	case Worst:
		return "worst"
	case Energy:
		return "energy"
	case BestRow:
		return "best_row"
	}
	return fmt.Sprintf("score(%d)", int(s))
}

// ParseScore parses a score name.
func ParseScore(s string) (Score, error) {
	for _, k := range Scores {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("score %q: want slot_worst, slot_energy, worst, energy or best_row", s)
}

// slotOnly reports whether the score reads only the secret rows.
func (s Score) slotOnly() bool { return s == SlotWorst || s == SlotEnergy }

// floorFrac floors outside fractions so that log10 stays finite.
const floorFrac = 1e-30

// Candidates are the candidate texts of one template with their rows, ready to be scored.
type Candidates struct {
	// Values are the secrets; Texts the filled template.
	Values, Texts []string
	// Rows are the candidates' hidden states; Slot the secret rows of each ([lo, hi) into its rows).
	Rows *Rows
	Slot [][2]int
	// kept holds the scored blocks (eachBlock) by whether they hold every row or the slot's,
	// prepared once while Keep is on (nil: prepared afresh on every pass).
	kept map[bool][]candidateBlock
}

// candidateBlock is candidates [first, last)'s scored rows, stacked and prepared.
type candidateBlock struct {
	first, last int
	rows        *baselines.PreparedRows // (rows, d)
}

// Keep makes the scoring passes keep the candidates' stacked rows, converted and checked once,
// for the passes that follow (one per victim and block), until Release; Rows and Slot must not
// change meanwhile. It costs 12 bytes per scored value (float64 and float32 copies).
func (c *Candidates) Keep() {
	if c.kept == nil {
		c.kept = map[bool][]candidateBlock{}
	}
}

// Release frees what Keep kept and stops keeping.
func (c *Candidates) Release() { c.kept = nil }

// Kept says whether Keep is on.
func (c *Candidates) Kept() bool { return c.kept != nil }

// Len is the number of candidates.
func (c *Candidates) Len() int { return len(c.Values) }

// scoreBlockRows bounds the rows passed to one Residuals call (a float64 block of ~12 MiB at d = 384).
const scoreBlockRows = 4096

// ScoreAll returns, for every candidate, the kinds' scores against rs: out[k][c] is kinds[k]'s
// log10 outside fraction of candidate c. Rows a kind does not read are not computed (slot scores
// read only the secret rows, which are few and make the pass cheap).
func (c *Candidates) ScoreAll(rs *baselines.RowSpace, kinds []Score) ([][]float64, error) {
	allRows := false
	for _, k := range kinds {
		if !k.slotOnly() {
			allRows = true
		}
	}
	// Row ranges scored per candidate.
	span := func(i int) (int, int) {
		if allRows {
			return 0, c.Rows.Off[i+1] - c.Rows.Off[i]
		}
		return c.Slot[i][0], c.Slot[i][1]
	}
	out := make([][]float64, len(kinds))
	for k := range out {
		out[k] = make([]float64, c.Len())
	}
	err := c.eachBlock(allRows, span, func(first, last int, block *baselines.PreparedRows) error {
		frac, energy, err := rs.ResidualsPrepared(block)
		if err != nil {
			return fmt.Errorf("content: candidates %d..%d: %w", first, last-1, err)
		}
		at := 0
		for i := first; i < last; i++ {
			lo, hi := span(i)
			f, e := frac[at:at+hi-lo], energy[at:at+hi-lo]
			at += hi - lo
			var slo, shi int // the slot rows within f
			if allRows {
				slo, shi = c.Slot[i][0], c.Slot[i][1]
			} else {
				slo, shi = 0, hi-lo
			}
			for k, kind := range kinds {
				var v float64
				switch kind {
				case SlotWorst:
					v = worst(f[slo:shi])
				case SlotEnergy:
					v = energyFrac(f[slo:shi], e[slo:shi])
				case Worst:
					v = worst(f)
				case Energy:
					v = energyFrac(f, e)
				case BestRow:
					v = 1.0
					for _, x := range f {
						v = min(v, x)
					}
				default:
					return fmt.Errorf("content: unknown score %d", int(kind))
				}
				out[k][i] = math.Log10(max(v, floorFrac))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachBlock hands fn the candidates in blocks of whole candidates, at most scoreBlockRows rows:
// candidates [first, last) with the rows span(i) of each, stacked in float64 (rows, d) and
// prepared. all says whether span is every row (else the slot's): the key of the blocks Keep keeps.
func (c *Candidates) eachBlock(all bool, span func(i int) (int, int), fn func(first, last int, block *baselines.PreparedRows) error) error {
	blocks, ok := c.kept[all]
	if !ok {
		var err error
		if blocks, err = c.stack(span); err != nil {
			return err
		}
		if c.kept != nil {
			c.kept[all] = blocks
		}
	}
	for _, b := range blocks {
		if err := fn(b.first, b.last, b.rows); err != nil {
			return err
		}
	}
	return nil
}

// stack stacks the candidates' rows span(i) in blocks of whole candidates of at most
// scoreBlockRows rows, each prepared for scoring.
func (c *Candidates) stack(span func(i int) (int, int)) ([]candidateBlock, error) {
	d := c.Rows.D
	var out []candidateBlock
	for first := 0; first < c.Len(); {
		rows, last := 0, first
		for last < c.Len() {
			lo, hi := span(last)
			if rows+hi-lo > scoreBlockRows && last > first {
				break
			}
			if hi-lo > scoreBlockRows {
				return nil, fmt.Errorf("content: candidate %d has %d rows, more than the block of %d", last, hi-lo, scoreBlockRows)
			}
			rows += hi - lo
			last++
		}
		block := mat.NewDense(max(rows, 1), d, nil) // (rows, d); mat refuses an empty matrix
		at := 0
		for i := first; i < last; i++ {
			lo, hi := span(i)
			for j, v := range c.Rows.Text(i)[lo*d : hi*d] {
				block.RawMatrix().Data[at*d+j] = float64(v)
			}
			at += hi - lo
		}
		p, err := baselines.PrepareRows(block.Slice(0, rows, 0, d).(*mat.Dense))
		if err != nil {
			return nil, fmt.Errorf("content: candidates %d..%d: %w", first, last-1, err)
		}
		out = append(out, candidateBlock{first: first, last: last, rows: p})
		first = last
	}
	return out, nil
}

// worst is the largest of f (1 for none).
func worst(f []float64) float64 {
	if len(f) == 0 {
		return 1
	}
	v := 0.0
	for _, x := range f {
		v = max(v, x)
	}
	return v
}

// energyFrac is the energy-weighted mean of f.
func energyFrac(f, e []float64) float64 {
	var tot, res float64
	for i, x := range f {
		tot += e[i]
		res += x * e[i]
	}
	if tot == 0 {
		return 1
	}
	return res / tot
}

// Outcome is where the secret landed among the candidates of one example.
type Outcome struct {
	// Rank is the secret's rank, 1 = best. Ties count against it in Locate, so a constant score
	// can never look like recovery; Run breaks them at random (LocateTies), which puts an
	// uninformative score at chance.
	Rank int `json:"rank"`
	// Margin is the best wrong candidate's score minus the secret's, in decades of residual
	// fraction: > 0 exactly when the secret is ranked first.
	Margin float64 `json:"margin"`
	// Secret and BestWrong are the two scores (log10 outside fraction).
	Secret    float64 `json:"secret"`
	BestWrong float64 `json:"best_wrong"`
	// Gap is the second-best score minus the best, whichever candidates they are: what the
	// attacker sees without knowing the secret.
	Gap float64 `json:"gap"`
}

// Locate ranks candidate secret among scores (lower is better). Ties count against the secret.
func Locate(scores []float64, secret int) (Outcome, error) {
	return LocateTies(scores, secret, nil)
}

// LocateTies is Locate with ties broken uniformly at random by rng (nil: against the secret):
// among k wrong candidates tied with it, the secret's rank is 1 + (better ones) + U{0..k}, so an
// uninformative score is recovered at chance, 1/|C|, in expectation.
func LocateTies(scores []float64, secret int, rng *rand.Rand) (Outcome, error) {
	if secret < 0 || secret >= len(scores) || len(scores) < 2 {
		return Outcome{}, fmt.Errorf("content: secret %d among %d candidates", secret, len(scores))
	}
	s := scores[secret]
	o := Outcome{Rank: 1, Secret: s, BestWrong: math.Inf(1)}
	best, second := math.Inf(1), math.Inf(1)
	ties := 0
	for i, v := range scores {
		if v < best {
			best, second = v, best
		} else if v < second {
			second = v
		}
		if i == secret {
			continue
		}
		if v < s {
			o.Rank++
		} else if v == s {
			ties++
		}
		o.BestWrong = min(o.BestWrong, v)
	}
	if rng == nil {
		o.Rank += ties
	} else {
		o.Rank += rng.IntN(ties + 1)
	}
	o.Margin = o.BestWrong - s
	o.Gap = second - best
	return o, nil
}
