package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of the plot: the cells that differ only in their (fixed) shield scale.
type series struct {
	label string
	rows  []Row
}

// errPoints are a line's points with their standard errors, for the error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// Plot draws val mass against shield scale for one task: one line per shield kind (and per value
// of any other setting that varies), error bars of one standard error, and the chance level as a
// dashed line. The x axis is logarithmic when the scales span a factor of 10 or more. Cells with a
// ranged scale have no single x and are left out. It returns nil when no cell has a fixed scale.
func (r *Report) Plot(task string) ([]byte, error) {
	var rows []Row
	for _, row := range r.Rows {
		if row.Task == task && row.Scale.Min == row.Scale.Max {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	tm := metricsFor(task, rows)
	lines := group(r, rows)

	p := plot.New()
	p.Title.Text = fmt.Sprintf("sweep %s: val %s vs shield scale", r.Sweep, tm.mass)
	p.X.Label.Text = "shield scale (shield row norm / mean clean row norm)"
	p.Y.Label.Text = "val " + tm.mass
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(8)
	p.Add(plotter.NewGrid())

	scales := distinctScales(rows)
	lo, hi := scales[0], scales[len(scales)-1]
	if hi/lo >= 10 {
		p.X.Scale = plot.LogScale{}
	}
	ticks := make(plot.ConstantTicks, len(scales))
	for i, s := range scales {
		ticks[i] = plot.Tick{Value: s, Label: strconv.FormatFloat(s, 'g', -1, 64)}
	}
	p.X.Tick.Marker = ticks
	// Keep the end points and their error bars off the frame: a margin of a factor on a log axis,
	// of a fraction of the range on a linear one (and some width around a single scale).
	switch {
	case lo == hi:
		p.X.Min, p.X.Max = lo/2, hi*2
	case hi/lo >= 10:
		p.X.Min, p.X.Max = lo/1.25, hi*1.25
	default:
		pad := (hi - lo) * 0.06
		p.X.Min, p.X.Max = lo-pad, hi+pad
	}

	var paperLegend *plotter.Scatter
	for i, s := range lines {
		pts := errPoints{XYs: make(plotter.XYs, len(s.rows)), YErrors: make(plotter.YErrors, len(s.rows))}
		for k, row := range s.rows {
			v := row.Final["val"]
			se := v[tm.mass+"_se"]
			pts.XYs[k] = plotter.XY{X: row.Scale.Min, Y: v[tm.mass]}
			pts.YErrors[k].Low, pts.YErrors[k].High = se, se
		}
		line, marks, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return nil, fmt.Errorf("plot %s, line %q: %w", task, s.label, err)
		}
		c := plotutil.Color(i)
		line.Color, marks.Color, marks.Shape = c, c, plotutil.Shape(i)
		line.Width, marks.Radius = vg.Points(1.5), vg.Points(3)
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s, line %q: %w", task, s.label, err)
		}
		bars.Color = c
		p.Add(line, marks, bars)
		p.Legend.Add(s.label, line, marks)
		// The paper's val figures at the same settings, as hollow rings of the line's colour.
		var ref plotter.XYs
		for _, row := range s.rows {
			if row.Paper != nil {
				ref = append(ref, plotter.XY{X: row.Scale.Min, Y: row.Paper.Val})
			}
		}
		if len(ref) > 0 {
			sc, err := plotter.NewScatter(ref)
			if err != nil {
				return nil, fmt.Errorf("plot %s, paper points of %q: %w", task, s.label, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: c, Shape: draw.RingGlyph{}, Radius: vg.Points(5)}
			p.Add(sc)
			if paperLegend == nil {
				paperLegend = &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: color.Gray{Y: 60}, Shape: draw.RingGlyph{}, Radius: vg.Points(5)}}
			}
		}
	}
	if paperLegend != nil {
		p.Legend.Add("paper (val)", paperLegend)
	}

	if chance := chanceLine(rows, tm.mass, scales); len(chance) > 0 {
		cl, err := plotter.NewLine(chance)
		if err != nil {
			return nil, fmt.Errorf("plot %s, chance: %w", task, err)
		}
		cl.Color = color.Gray{Y: 80}
		cl.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		cl.Width = vg.Points(1.5)
		p.Add(cl)
		p.Legend.Add("chance", cl)
	}

	w, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", task, err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plot %s: %w", task, err)
	}
	return b.Bytes(), nil
}

// group splits rows (already sorted) into lines by everything but the scale, each line's points
// in increasing scale.
func group(r *Report, rows []Row) []series {
	// The label names the kind, plus the fraction and extra columns only when they vary, so a
	// plain kind-by-scale grid is labelled by kind alone.
	fracVaries := false
	for _, row := range rows {
		if row.FracText() != rows[0].FracText() || row.Randomization() != rows[0].Randomization() {
			fracVaries = true
		}
	}
	var extraVaries []bool
	for i := range r.ExtraCols {
		v := false
		for _, row := range rows {
			if row.Extra[i] != rows[0].Extra[i] {
				v = true
			}
		}
		extraVaries = append(extraVaries, v)
	}
	var out []series
	at := map[string]int{}
	for _, row := range rows {
		parts := []string{row.Kind}
		if fracVaries {
			parts = append(parts, "fraction "+row.FracText())
			if rnd := row.Randomization(); rnd != "none" {
				parts = append(parts, rnd)
			}
		}
		for i, p := range r.ExtraCols {
			if extraVaries[i] {
				parts = append(parts, r.label(p)+"="+row.Extra[i])
			}
		}
		label := strings.Join(parts, ", ")
		k, ok := at[label]
		if !ok {
			k = len(out)
			at[label] = k
			out = append(out, series{label: label})
		}
		out[k].rows = append(out[k].rows, row)
	}
	for _, s := range out {
		sort.SliceStable(s.rows, func(i, j int) bool { return s.rows[i].Scale.Min < s.rows[j].Scale.Min })
	}
	return out
}

func distinctScales(rows []Row) []float64 {
	var s []float64
	for _, r := range rows {
		s = append(s, r.Scale.Min)
	}
	sort.Float64s(s)
	out := s[:1]
	for _, x := range s[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// chanceLine is the mean val chance level of the cells at each scale: chance is computed per
// example, so it differs a little between cells.
func chanceLine(rows []Row, mass string, scales []float64) plotter.XYs {
	out := make(plotter.XYs, 0, len(scales))
	for _, s := range scales {
		sum, n := 0.0, 0
		for _, r := range rows {
			if c, ok := r.Final["val"][mass+"_chance"]; ok && r.Scale.Min == s && !math.IsNaN(c) {
				sum += c
				n++
			}
		}
		if n > 0 {
			out = append(out, plotter.XY{X: s, Y: sum / float64(n)})
		}
	}
	if len(out) == 1 {
		// A single point draws no line: stretch it across the axis.
		c := out[0]
		out = plotter.XYs{{X: c.X / 2, Y: c.Y}, {X: c.X * 2, Y: c.Y}}
	}
	return out
}
