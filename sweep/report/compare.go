package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"
)

// PaperChance is the chance level of both of the paper's tables: 4 positives among 64 in-batch
// candidates for retrieval, a pool of K = 16 for unmixing.
const PaperChance = 0.0625

// Paired is one cell that has the paper's figures, with what the comparison needs.
type Paired struct {
	// Name is the cell's label, else its directory name.
	Name string
	// Val, ValSE and ValChance are our val mass, its standard error and its chance level.
	Val, ValSE, ValChance float64
	// Train and TrainChance are our train mass and its chance level.
	Train, TrainChance float64
	// PaperVal and PaperTrain are the paper's figures.
	PaperVal, PaperTrain float64
	// Random and RandomSE are the random-rows mass of the same val examples and its standard
	// error (unmixing); NaN when the cell has none.
	Random, RandomSE float64
}

// Ratio is our val mass above our chance over the paper's above paperChance: how much of the
// paper's learned mass the cell reaches. NaN when the paper is at or below chance.
func (p Paired) Ratio(paperChance float64) float64 {
	return ratio(p.Val-p.ValChance, p.PaperVal-paperChance)
}

// TrainRatio is Ratio for the train figures.
func (p Paired) TrainRatio(paperChance float64) float64 {
	return ratio(p.Train-p.TrainChance, p.PaperTrain-paperChance)
}

func ratio(ours, paper float64) float64 {
	if !(paper > 0) {
		return math.NaN()
	}
	return ours / paper
}

// Inversion is a pair of cells that we order one way by val mass and the paper the other.
type Inversion struct {
	// A and B are the pair, A the one with our larger val mass.
	A, B Paired
	// Distance is our difference in combined standard errors: (A.Val − B.Val) / √(A.ValSE² + B.ValSE²).
	Distance float64
}

// Comparison is how one task's cells with the paper's figures compare with them.
type Comparison struct {
	// Task is the model's task.
	Task string
	// Cells are the task's cells that have the paper's figures, in the report's order.
	Cells []Paired
	// Pairs is the number of pairs of Cells; Ties of them are tied in ours or the paper's figures.
	Pairs, Ties int
	// Inversions are the pairs ordered against the paper, widest first.
	Inversions []Inversion
	// Spearman and Pearson correlate our val mass with the paper's across Cells.
	Spearman, Pearson float64
}

// Compare pairs every finished cell that has the paper's figures with them, task by task.
func (r *Report) Compare() []Comparison {
	var out []Comparison
	for _, task := range r.Tasks() {
		tm := metricsFor(task, r.Rows)
		c := Comparison{Task: task}
		for _, row := range r.Rows {
			if row.Task != task || row.Paper == nil {
				continue
			}
			name := row.Label
			if name == "" {
				name = row.Cell
			}
			va, tr := row.Final["val"], row.Final["train"]
			c.Cells = append(c.Cells, Paired{
				Name: name,
				Val:  get(va, tm.mass), ValSE: get(va, tm.mass+"_se"), ValChance: get(va, tm.mass+"_chance"),
				Train: get(tr, tm.mass), TrainChance: get(tr, tm.mass+"_chance"),
				PaperVal: row.Paper.Val, PaperTrain: row.Paper.Train,
				Random: get(va, "random_mass"), RandomSE: get(va, "random_mass_se"),
			})
		}
		if len(c.Cells) == 0 {
			continue
		}
		c.pairs()
		out = append(out, c)
	}
	return out
}

func get(m map[string]float64, k string) float64 {
	if v, ok := m[k]; ok {
		return v
	}
	return math.NaN()
}

// inversions compares every pair i < j of ours and paper (one value per cell): ties counts the
// pairs tied (or NaN) on either side, against lists the pairs ordered against the paper, in
// (i, j) order.
func inversions(ours, paper []float64) (ties int, against [][2]int) {
	for i := range ours {
		for j := i + 1; j < len(ours); j++ {
			o, p := ours[i]-ours[j], paper[i]-paper[j]
			switch {
			case o == 0 || p == 0 || math.IsNaN(o):
				ties++
			case (o > 0) != (p > 0):
				against = append(against, [2]int{i, j})
			}
		}
	}
	return ties, against
}

// pairs counts the pairs, finds the inversions and the correlations.
func (c *Comparison) pairs() {
	n := len(c.Cells)
	c.Pairs = n * (n - 1) / 2
	ours, paper := make([]float64, n), make([]float64, n)
	for i, p := range c.Cells {
		ours[i], paper[i] = p.Val, p.PaperVal
	}
	var against [][2]int
	c.Ties, against = inversions(ours, paper)
	for _, ij := range against {
		a, b := c.Cells[ij[0]], c.Cells[ij[1]]
		if a.Val < b.Val {
			a, b = b, a
		}
		c.Inversions = append(c.Inversions, Inversion{A: a, B: b, Distance: (a.Val - b.Val) / math.Hypot(a.ValSE, b.ValSE)})
	}
	sort.SliceStable(c.Inversions, func(i, j int) bool { return c.Inversions[i].Distance > c.Inversions[j].Distance })
	c.Pearson = pearson(ours, paper)
	c.Spearman = pearson(ranks(ours), ranks(paper))
}

// ranks gives each value its 1-based rank, tied values the mean of their ranks.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			r[idx[k]] = float64(i+j)/2 + 1
		}
		i = j + 1
	}
	return r
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i] / n
		my += y[i] / n
	}
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// PaperMarkdown renders the comparisons: per cell the share of the paper's mass above chance we
// reach (paperChance is the paper's chance level, PaperChance for its tables), the pairs of cells
// ordered against the paper with their distance in standard errors, and, where the cells have
// one, our mass against the random-rows floor of the same examples.
func PaperMarkdown(cs []Comparison, paperChance float64) []byte {
	var b bytes.Buffer
	pct := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	for _, c := range cs {
		fmt.Fprintf(&b, "## %s: against the paper\n\n", c.Task)
		fmt.Fprintf(&b, "Ratio: (our mass − our chance) / (paper − %.4f), the share of the paper's mass above chance that "+
			"we reach; ±1 SE moves our val mass by its standard error.\n\n", paperChance)
		writeMDRow(&b, []string{"cell", "ours − chance (val)", "paper − chance (val)", "ratio (val)", "ratio at ±1 SE", "ratio (train)"})
		writeMDRow(&b, []string{"---", "---", "---", "---", "---", "---"})
		for _, p := range c.Cells {
			lo := ratio(p.Val-p.ValSE-p.ValChance, p.PaperVal-paperChance)
			hi := ratio(p.Val+p.ValSE-p.ValChance, p.PaperVal-paperChance)
			span := "-"
			if !math.IsNaN(lo) && !math.IsNaN(hi) {
				span = pct(lo) + "–" + pct(hi)
			}
			writeMDRow(&b, []string{p.Name, fmt.Sprintf("%+.4f", p.Val-p.ValChance), fmt.Sprintf("%+.4f", p.PaperVal-paperChance),
				pct(p.Ratio(paperChance)), span, pct(p.TrainRatio(paperChance))})
		}
		fmt.Fprintf(&b, "\nOf the %d pairs of cells, %d are ordered by val mass against the paper and %d are tied; "+
			"Spearman %.2f, Pearson %.2f. Distance: |our difference| / √(SE₁² + SE₂²), the errors combined as if independent.\n\n",
			c.Pairs, len(c.Inversions), c.Ties, c.Spearman, c.Pearson)
		if len(c.Inversions) > 0 {
			writeMDRow(&b, []string{"pair", "ours (val)", "difference", "distance", "paper (val)", "paper difference"})
			writeMDRow(&b, []string{"---", "---", "---", "---", "---", "---"})
			for _, in := range c.Inversions {
				writeMDRow(&b, []string{in.A.Name + " vs " + in.B.Name,
					fmt.Sprintf("%.4f vs %.4f", in.A.Val, in.B.Val), fmt.Sprintf("%+.4f", in.A.Val-in.B.Val),
					fmt.Sprintf("%.1f SE", in.Distance),
					fmt.Sprintf("%.4f vs %.4f", in.A.PaperVal, in.B.PaperVal), fmt.Sprintf("%+.4f", in.A.PaperVal-in.B.PaperVal)})
			}
			b.WriteString("\n")
		}
		var floor [][]string
		for _, p := range c.Cells {
			if math.IsNaN(p.Random) {
				continue
			}
			d := p.Val - p.Random
			floor = append(floor, []string{p.Name,
				fmt.Sprintf("%.4f ± %.4f", p.Val, p.ValSE), fmt.Sprintf("%.4f ± %.4f", p.Random, p.RandomSE),
				fmt.Sprintf("%+.4f", d), fmt.Sprintf("%+.1f SE", d/math.Hypot(p.ValSE, p.RandomSE))})
		}
		if len(floor) > 0 {
			b.WriteString("Against random rows of the split on the same val examples: distance (ours − random) / √(SE₁² + SE₂²).\n\n")
			writeMDRow(&b, []string{"cell", "val mass", "random rows", "ours − random", "distance"})
			writeMDRow(&b, []string{"---", "---", "---", "---", "---"})
			for _, f := range floor {
				writeMDRow(&b, f)
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}
