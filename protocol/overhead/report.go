package overhead

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// PaperRow is one n of the paper's compute-side overhead figure (docs/paper.md, "The protocol
// itself": Llama-2 7B layers, two processes on two GPUs, A generation + mix + GEMM + unmix + copy).
type PaperRow struct {
	N           int     // sequence length
	OverheadPct float64 // (GELO - baseline) / baseline, percent
	GELOms      float64 // GELO total, ms
	Baselinems  float64 // plain layer, ms (its copy included)
}

// Paper is the paper's overhead per n.
var Paper = []PaperRow{
	{64, 28.9, 4.49, 3.48},
	{128, 29.2, 5.79, 4.48},
	{256, 19.9, 8.93, 7.44},
	{512, 20.1, 16.11, 13.41},
	{1024, 26.2, 30.36, 24.06},
	{2048, 32.8, 60.31, 45.41},
	{4096, 32.8, 218.75, 164.74},
	{8192, 50.1, 537.85, 358.41},
}

// PaperBreakdown is the paper's breakdown at n = PaperBreakdown.N, in ms.
var PaperBreakdown = struct {
	N                            int
	AGen, Mix, GEMM, Unmix, Copy float64 // the GELO parts (A generation by QR)
	BaselineGEMM, BaselineCopy   float64 // the plain layer's parts
	Total, BaselineTotal         float64
}{N: 512, AGen: 2.322, Mix: 0.199, GEMM: 0.441, Unmix: 0.272, Copy: 14.186,
	BaselineGEMM: 0.443, BaselineCopy: 14.123, Total: 17.420, BaselineTotal: 14.566}

// paperAt returns the paper's row of n.
func paperAt(n int) (PaperRow, bool) {
	i := slices.IndexFunc(Paper, func(p PaperRow) bool { return p.N == n })
	if i < 0 {
		return PaperRow{}, false
	}
	return Paper[i], true
}

// kindTitle names a kind of A in headings.
func (r Result) kindTitle(k MixKind) string {
	if k == MixOrthogonal {
		return "orthogonal A (Haar; unmixed with A^T)"
	}
	return fmt.Sprintf("non-orthogonal A (cond %g; A^-1 formed with A)", r.Config.Kappa)
}

// kindShort is a kind's column label.
func (r Result) kindShort(k MixKind) string {
	if k == MixOrthogonal {
		return "orthogonal"
	}
	return fmt.Sprintf("kappa %g", r.Config.Kappa)
}

// ms formats milliseconds: three decimals, one from a second up.
func ms(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// pct formats a percentage with one decimal.
func pct(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// spread is "median [min, max]".
func spread(s Stat) string { return fmt.Sprintf("%s [%s, %s]", ms(s.Median), ms(s.Min), ms(s.Max)) }

// onDevice says whether a Backend computed (and the copy part is a real upload).
func (r Result) onDevice() bool { return r.Config.Backend != nil }

// copyCell is the copy part of our row: the upload time on a device, "0 (n/a)" on the CPU.
func (r Result) copyCell(s Stat, withSpread bool) string {
	if !r.onDevice() {
		return "0 (n/a)"
	}
	if withSpread {
		return spread(s)
	}
	return ms(s.Median)
}

// Markdown renders the result: per kind of A, the overhead per n in the paper's layout with the
// paper's figures beside ours; the breakdown at Config.BreakdownN beside the paper's; every part
// at every n; and where our A generation stands against the paper's.
func (r Result) Markdown() []byte {
	var b bytes.Buffer
	c := r.Config
	b.WriteString("# GELO protocol overhead: one protected linear layer against the plain one\n\n")
	fmt.Fprintf(&b, "Device: %s", r.Device)
	if r.Threads > 0 {
		fmt.Fprintf(&b, ", %d BLAS threads", r.Threads)
	}
	fmt.Fprintf(&b, ". A drawn on the host in float64 with %s, rounded to float32; GEMMs in float32.\n", r.QR)
	fmt.Fprintf(&b, "H: (n, %d), W: (%d, %d); %d rounds per n", c.D, c.D, c.P, c.Repeats)
	if c.MaxTimePerN > 0 {
		fmt.Fprintf(&b, ", or fewer once an n's rounds have taken %v (the rounds column says how many ran)", c.MaxTimePerN)
	}
	fmt.Fprintf(&b, "; medians; seed %d.\n\n", c.Seed)
	if r.onDevice() {
		b.WriteString("Copy is the host-to-device upload of A (and A^-1), the transfer GELO adds to the baseline's; " +
			"the paper's copy (about 14 ms at n = 512, two processes on two GPUs) is in both its GELO and baseline figures.\n\n")
	} else {
		b.WriteString("Copy: there is no host-device transfer on the CPU, so the copy part is 0 (n/a). " +
			"The paper's figures include a copy of about 14 ms at n = 512 (two processes on two GPUs) in both GELO and the baseline, " +
			"where it dominates; ours are compute only, so our overhead is measured against a much smaller baseline.\n\n")
	}

	for _, k := range c.Mixes {
		fmt.Fprintf(&b, "## Overhead per n: %s\n\n", r.kindTitle(k))
		b.WriteString("| n | overhead % (ours) | overhead % (paper) | GELO ms (ours) | GELO ms (paper) | baseline ms (ours) | baseline ms (paper) |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range c.Ns {
			row, ok := r.Lookup(n, k)
			if !ok {
				continue
			}
			po, pg, pb := "-", "-", "-"
			if p, ok := paperAt(n); ok {
				po, pg, pb = pct(p.OverheadPct), ms(p.GELOms), ms(p.Baselinems)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", n, pct(row.Overhead()), po, ms(row.Total()), pg, ms(row.Baseline.Median), pb)
		}
		b.WriteString("\n")
	}

	r.writeBreakdown(&b)
	r.writeParts(&b)
	return b.Bytes()
}

// writeBreakdown writes the parts at Config.BreakdownN beside the paper's at its n, and the
// sentence on A generation.
func (r Result) writeBreakdown(b *bytes.Buffer) {
	c, pb := r.Config, PaperBreakdown
	var rows []Row
	for _, k := range c.Mixes {
		if row, ok := r.Lookup(c.BreakdownN, k); ok {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Breakdown at n = %d (ms: median [min, max] over the rounds)\n\n| part |", c.BreakdownN)
	for _, row := range rows {
		fmt.Fprintf(b, " %s (ours) |", r.kindShort(row.Kind))
	}
	fmt.Fprintf(b, " paper (n = %d) |\n|---|", pb.N)
	for range rows {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	line := func(part string, ours func(Row) string, paper string) {
		fmt.Fprintf(b, "| %s |", part)
		for _, row := range rows {
			fmt.Fprintf(b, " %s |", ours(row))
		}
		fmt.Fprintf(b, " %s |\n", paper)
	}
	line("A generation", func(w Row) string { return spread(w.AGen) }, ms(pb.AGen)+" (QR)")
	line("copy", func(w Row) string { return r.copyCell(w.Copy, true) }, ms(pb.Copy))
	line("mix U = A H", func(w Row) string { return spread(w.Mix) }, ms(pb.Mix))
	line("GEMM Y = U W", func(w Row) string { return spread(w.GEMM) }, ms(pb.GEMM))
	line("unmix A^-1 Y", func(w Row) string { return spread(w.Unmix) }, ms(pb.Unmix))
	line("**GELO total** (sum of medians)", func(w Row) string { return ms(w.Total()) }, ms(pb.Total))
	line("baseline GEMM H W", func(w Row) string { return spread(w.Baseline) }, ms(pb.BaselineGEMM))
	line("baseline copy", func(Row) string { return "0 (n/a)" }, ms(pb.BaselineCopy))
	line("**baseline total**", func(w Row) string { return ms(w.Baseline.Median) }, ms(pb.BaselineTotal))
	line("overhead %", func(w Row) string { return pct(w.Overhead()) }, pct((pb.Total-pb.BaselineTotal)/pb.BaselineTotal*100))
	b.WriteString("\n")

	// Where our A generation stands against the paper's at its n.
	orth, okO := r.Lookup(pb.N, MixOrthogonal)
	kap, okK := r.Lookup(pb.N, MixKappa)
	switch {
	case okO:
		fmt.Fprintf(b, "A generation at n = %d: our Haar A takes %s ms (%s in float64 on the host, with the Gaussian draw and the rounding to float32), "+
			"%.1fx the paper's %s ms for its QR", pb.N, ms(orth.AGen.Median), r.QR, orth.AGen.Median/pb.AGen, ms(pb.AGen))
		if okK {
			fmt.Fprintf(b, "; the cond-%g A with its inverse (two Haar draws and two GEMMs) takes %s ms (%.1fx)", c.Kappa, ms(kap.AGen.Median), kap.AGen.Median/pb.AGen)
		}
		fmt.Fprintf(b, ". Ours is %.0f%% of our GELO total there, the paper's %.0f%% of its total (%.0f%% of its total less the copy).\n\n",
			orth.AGen.Median/orth.Total()*100, pb.AGen/pb.Total*100, pb.AGen/(pb.Total-pb.Copy)*100)
	case okK:
		fmt.Fprintf(b, "A generation at n = %d: our cond-%g A with its inverse takes %s ms (%s in float64 on the host), %.1fx the paper's %s ms for its QR.\n\n",
			pb.N, c.Kappa, ms(kap.AGen.Median), r.QR, kap.AGen.Median/pb.AGen, ms(pb.AGen))
	default:
		fmt.Fprintf(b, "n = %d was not measured, so our A generation cannot be set beside the paper's %s ms.\n\n", pb.N, ms(pb.AGen))
	}
}

// writeParts writes every part's median at every n.
func (r Result) writeParts(b *bytes.Buffer) {
	b.WriteString("## Parts at every n (ms, medians; quartiles, min and max in the CSV)\n\n")
	b.WriteString("| n | A | rounds | A generation | copy | mix | GEMM | unmix | GELO total | baseline | overhead % | check |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range r.Rows {
		fmt.Fprintf(b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1e |\n", w.N, r.kindShort(w.Kind), w.Rounds,
			ms(w.AGen.Median), r.copyCell(w.Copy, false), ms(w.Mix.Median), ms(w.GEMM.Median), ms(w.Unmix.Median),
			ms(w.Total()), ms(w.Baseline.Median), pct(w.Overhead()), w.RelErr)
	}
	b.WriteString("\ncheck: max |A^-1 Y - H W| / max |H W| in the last round, the unmixed result against the plain one.\n")
}

// csvParts are the CSV's per-part column prefixes, in order.
var csvParts = []string{"agen", "copy", "mix", "gemm", "unmix", "baseline"}

// CSV renders one line per row: every part's median, quartiles, min and max, the totals, the
// check, and the paper's figures at that n (empty where the paper has none).
func (r Result) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := []string{"n", "mix", "kappa", "rounds"}
	for _, p := range csvParts {
		head = append(head, p+"_median_ms", p+"_q1_ms", p+"_q3_ms", p+"_min_ms", p+"_max_ms")
	}
	head = append(head, "gelo_total_ms", "overhead_pct", "rel_err", "paper_overhead_pct", "paper_gelo_ms", "paper_baseline_ms")
	_ = w.Write(head) // a bytes.Buffer does not fail
	// Shortest exact decimals: the file round-trips the values, so its columns add up as the
	// rows' do.
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, row := range r.Rows {
		kappa := "1"
		if row.Kind == MixKappa {
			kappa = strconv.FormatFloat(r.Config.Kappa, 'g', -1, 64)
		}
		rec := []string{strconv.Itoa(row.N), string(row.Kind), kappa, strconv.Itoa(row.Rounds)}
		for _, s := range []Stat{row.AGen, row.Copy, row.Mix, row.GEMM, row.Unmix, row.Baseline} {
			rec = append(rec, f(s.Median), f(s.Q1), f(s.Q3), f(s.Min), f(s.Max))
		}
		rec = append(rec, f(row.Total()), f(row.Overhead()), strconv.FormatFloat(row.RelErr, 'e', 3, 64))
		if p, ok := paperAt(row.N); ok {
			rec = append(rec, f(p.OverheadPct), f(p.GELOms), f(p.Baselinems))
		} else {
			rec = append(rec, "", "", "")
		}
		_ = w.Write(rec)
	}
	w.Flush()
	return b.Bytes()
}

// PlotPNG draws overhead % against n (a logarithmic axis, ticks at each n): one line per kind of
// A measured and the paper's. The y axis is logarithmic when every value is positive and they
// span a factor of 10 or more (ours on a CPU can be tens of times the paper's).
func (r Result) PlotPNG() ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("GELO overhead vs n (d = %d, p = %d), ours on %s", r.Config.D, r.Config.P, r.shortDevice())
	p.X.Label.Text = "n (rows of H, size of A)"
	p.Y.Label.Text = "overhead % = (GELO - baseline) / baseline"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	type line struct {
		label string
		pts   plotter.XYs
	}
	var lines []line
	for _, k := range r.Config.Mixes {
		var pts plotter.XYs
		for _, n := range r.Config.Ns {
			if row, ok := r.Lookup(n, k); ok {
				pts = append(pts, plotter.XY{X: float64(n), Y: row.Overhead()})
			}
		}
		if len(pts) > 0 {
			lines = append(lines, line{"ours, " + r.kindShort(k), pts})
		}
	}
	var paper plotter.XYs
	for _, pr := range Paper {
		paper = append(paper, plotter.XY{X: float64(pr.N), Y: pr.OverheadPct})
	}
	lines = append(lines, line{"paper (two GPUs, copy included)", paper})

	var ns []int
	lo, hi, positive := math.Inf(1), math.Inf(-1), true
	for _, l := range lines {
		for _, pt := range l.pts {
			ns = append(ns, int(pt.X))
			lo, hi = min(lo, pt.Y), max(hi, pt.Y)
			positive = positive && pt.Y > 0
		}
	}
	slices.Sort(ns)
	ns = slices.Compact(ns)
	p.X.Scale = plot.LogScale{}
	ticks := make(plot.ConstantTicks, len(ns))
	for i, n := range ns {
		ticks[i] = plot.Tick{Value: float64(n), Label: strconv.Itoa(n)}
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = float64(ns[0])/1.25, float64(ns[len(ns)-1])*1.25
	if positive && hi/lo >= 10 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	} else {
		p.Y.Min = min(0, lo*1.1)
		p.Y.Max = hi * 1.1
	}

	for i, l := range lines {
		ln, marks, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return nil, fmt.Errorf("overhead plot, line %q: %w", l.label, err)
		}
		c := plotutil.Color(i)
		if i == len(lines)-1 {
			c = color.Gray{Y: 80}
			ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		ln.Color, marks.Color, marks.Shape = c, c, plotutil.Shape(i)
		ln.Width, marks.Radius = vg.Points(1.5), vg.Points(3)
		p.Add(ln, marks)
		p.Legend.Add(l.label, ln, marks)
	}
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return nil, fmt.Errorf("overhead plot: %w", err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("overhead plot: %w", err)
	}
	return b.Bytes(), nil
}

// shortDevice names the device in a few words: the CPU and its BLAS threads, or the Backend's
// name up to its first ';' or '('.
func (r Result) shortDevice() string {
	if !r.onDevice() {
		return fmt.Sprintf("the CPU (%d BLAS threads)", r.Threads)
	}
	name := r.Device
	if i := strings.IndexAny(name, ";("); i > 0 {
		name = strings.TrimSpace(name[:i])
	}
	return name
}

// Plot writes PlotPNG's image to path.
func (r Result) Plot(path string) error {
	png, err := r.PlotPNG()
	if err != nil {
		return err
	}
	if err := safefile.WriteFileAtomic(path, png); err != nil {
		return fmt.Errorf("overhead plot: %w", err)
	}
	return nil
}
