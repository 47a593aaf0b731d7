package assess

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// The frontier plot's geometry (SVG user units) and its series' colours.
const (
	svgW, svgH                     = 720, 400
	padL, padR, padT, padB float64 = 64, 170, 36, 56
)

var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// FrontierSVG is the frontier plot, privacy against overhead: for each applicable attack and each
// setting with results, the success rate with its interval (a whisker) at the setting's FLOPs per
// protected call relative to the plain call (log scale). Hollow markers failed (Cell.fails: no
// success on any prompt, or a ranking no better than chance); the deployment's markers are ringed. Self-contained SVG (no fonts or images fetched).
func (s *Summary) FrontierSVG() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, "<title>Privacy against overhead</title>\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", svgW, svgH)
	if s.D == 0 {
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no results yet</text>\n</svg>\n", svgW/2, svgH/2)
		return b.Bytes()
	}
	// The x range: whole decades around every setting's FLOP ratio.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, st := range s.Settings {
		r := math.Log10(CostOf(st, s.D, s.P).Ratio())
		lo, hi = min(lo, r), max(hi, r)
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi-lo < 1 {
		hi = lo + 1
	}
	plotW, plotH := float64(svgW)-padL-padR, float64(svgH)-padT-padB
	xOf := func(ratio float64) float64 { return padL + (math.Log10(ratio)-lo)/(hi-lo)*plotW }
	yOf := func(rate float64) float64 { return padT + (1-rate)*plotH }
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	fmt.Fprintf(&b, "<text x=\"%s\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">Privacy against overhead (%d%% intervals)</text>\n", num(padL+plotW/2), int(100*Confidence))
	// Axes, grid and ticks.
	fmt.Fprintf(&b, "<g stroke=\"#999\" stroke-width=\"1\" fill=\"none\"><rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/></g>\n", num(padL), num(padT), num(plotW), num(plotH))
	for _, rate := range []float64{0, 0.25, 0.5, 0.75, 1} {
		y := yOf(rate)
		fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#e4e4e4\"/>\n<text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n",
			num(padL), num(y), num(padL+plotW), num(y), num(padL-6), num(y+4), strconv.FormatFloat(rate, 'g', -1, 64))
	}
	for dec := lo; dec <= hi; dec++ {
		x := padL + (dec-lo)/(hi-lo)*plotW
		fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#e4e4e4\"/>\n<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n",
			num(x), num(padT), num(x), num(padT+plotH), num(x), num(padT+plotH+16), html.EscapeString(strconv.FormatFloat(math.Pow(10, dec), 'g', -1, 64)))
	}
	fmt.Fprintf(&b, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">GELO FLOPs per protected call / plain call (log scale)</text>\n", num(padL+plotW/2), svgH-12)
	fmt.Fprintf(&b, "<text x=\"16\" y=\"%s\" text-anchor=\"middle\" transform=\"rotate(-90 16 %s)\">prompts attacked successfully (rate)</text>\n", num(padT+plotH/2), num(padT+plotH/2))
	// Settings of equal cost (the scales of one shield count) are spread sideways around it, and
	// each attack's series offset a little, so that no whisker hides another.
	spread := make([]float64, len(s.Settings))
	for i, st := range s.Settings {
		r := CostOf(st, s.D, s.P).Ratio()
		same, at := 0, 0
		for j, o := range s.Settings {
			if CostOf(o, s.D, s.P).Ratio() == r {
				if j < i {
					at++
				}
				same++
			}
		}
		spread[i] = (float64(at) - float64(same-1)/2) * 14
	}
	series := 0
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			continue
		}
		col := svgColors[series%len(svgColors)]
		dx := float64(series) * 4
		if a.Frontier >= 0 {
			c := a.Cells[a.Frontier]
			x := xOf(CostOf(c.Setting, s.D, s.P).Ratio()) + spread[a.Frontier] + dx
			fmt.Fprintf(&b, "<text x=\"%s\" y=\"%s\" stroke=\"none\" font-size=\"10\" transform=\"rotate(-60 %s %s)\">%s fails first: %s</text>\n",
				num(x), num(yOf(0)-14), num(x), num(yOf(0)-14), html.EscapeString(a.Name), html.EscapeString(c.Setting.Name))
		}
		fmt.Fprintf(&b, "<g class=\"series\" data-attack=\"%s\" stroke=\"%s\" fill=\"%s\">\n", html.EscapeString(a.Name), col, col)
		for si, c := range a.Cells {
			if c.Prompts == 0 {
				continue
			}
			x := xOf(CostOf(c.Setting, s.D, s.P).Ratio()) + spread[si] + dx
			y := yOf(c.Interval.Rate())
			fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke-width=\"1.5\"/>\n", num(x), num(yOf(c.Interval.Lo)), num(x), num(yOf(c.Interval.Hi)))
			fill := col
			if c.fails() {
				fill = "white"
			}
			fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"4.5\" fill=\"%s\" stroke-width=\"1.5\"><title>%s, %s: %s</title></circle>\n",
				num(x), num(y), fill, html.EscapeString(a.Name), html.EscapeString(c.Setting.Name), html.EscapeString(c.Interval.String()))
			if si == 0 {
				fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"8\" fill=\"none\" stroke-width=\"1\"/>\n", num(x), num(y))
			}
		}
		ly := padT + 16 + float64(series)*20
		lx := padL + plotW + 16
		fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"4.5\"/><text x=\"%s\" y=\"%s\" stroke=\"none\" fill=\"#222\">%s</text>\n</g>\n",
			num(lx), num(ly), num(lx+10), num(ly+4), html.EscapeString(a.Name))
		series++
	}
	ly := padT + 16 + float64(series)*20
	fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"8\" fill=\"none\" stroke=\"#444\"/><text x=\"%s\" y=\"%s\" fill=\"#222\">the deployment</text>\n",
		num(padL+plotW+16), num(ly), num(padL+plotW+26), num(ly+4))
	fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"4.5\" fill=\"white\" stroke=\"#444\"/><text x=\"%s\" y=\"%s\" fill=\"#222\">attack fails</text>\n",
		num(padL+plotW+16), num(ly+20), num(padL+plotW+26), num(ly+24))
	b.WriteString("</svg>\n")
	return b.Bytes()
}
