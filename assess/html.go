package assess

import (
	"bytes"
	"fmt"
	"html"
	"strconv"
)

// htmlStyle is report.html's only style: the file stands alone (no external assets).
const htmlStyle = `body{font-family:system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eee}td.num{text-align:right}code{background:#f4f4f4}figure{margin:1em 0}`

// HTML is report.html: the tables of report.md and the frontier as inline SVG, in one file.
func (s *Summary) HTML(redact bool) []byte {
	var b bytes.Buffer
	e := html.EscapeString
	title, lines := s.header()
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s\n</style>\n</head>\n<body>\n", e(title), htmlStyle)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", e(title))
	for _, l := range lines {
		fmt.Fprintf(&b, "<p>%s</p>\n", e(l))
	}
	dep := s.Settings[0]
	fmt.Fprintf(&b, "<h2>Verdicts at the deployment</h2>\n<p>Setting: %s.</p>\n", e(dep.Describe()))
	if s.D > 0 {
		fmt.Fprintf(&b, "<p>Cost: %s.</p>\n", e(CostOf(dep, s.D, s.P).String()))
	}
	b.WriteString("<table id=\"verdicts\">\n<tr><th>attack</th><th>verdict</th><th>claims</th><th>prompts</th><th>batches</th><th>candidate passes</th></tr>\n")
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>does not apply: %s</td><td>-</td><td>-</td><td>-</td><td>-</td></tr>\n", e(a.Name), e(a.NotApplicable))
			continue
		}
		c := a.Cells[0]
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"num\">%d of %d</td><td class=\"num\">%d</td><td class=\"num\">%d</td></tr>\n",
			e(a.Name), e(c.Verdict(a.Success)), e(c.ClaimsText(a.Claimed, a.Undecided)), c.Prompts, c.Expected, c.Batches, c.Passes)
	}
	b.WriteString("</table>\n<p>The attacker's budget:</p>\n<ul>\n")
	for _, a := range s.Attacks {
		fmt.Fprintf(&b, "<li><b>%s</b>: %s.</li>\n", e(a.Name), e(a.Budget))
	}
	b.WriteString("</ul>\n")
	if len(s.Samples) > 0 {
		fmt.Fprintf(&b, "<h2>What %s read (the deployment, first %d prompts)</h2>\n", e(s.Samples[0].Attack), len(s.Samples))
		b.WriteString("<table id=\"samples\">\n<tr><th>prompt</th><th>true text</th><th>decoded text</th><th>exact</th><th>claimed</th></tr>\n")
		for _, r := range s.Samples {
			truth, got := r.Text, r.DecodedText
			if redact {
				truth, got = "(redacted)", "(redacted)"
			}
			if r.Decoded == nil {
				got = "(nothing decoded)"
			}
			fmt.Fprintf(&b, "<tr><td class=\"num\">%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", r.Prompt, e(truth), e(got), yesNo(r.Success), yesNo(r.Claimed))
		}
		b.WriteString("</table>\n")
	}
	if len(s.SecretSamples) > 0 {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<p>%s</p>\n", e(secretSampleTitle()), e(secretSampleNote))
		htmlTable(&b, "id=\"secrets\"", secretSampleHeader, len(s.SecretSamples), func(i int) []string { return secretSampleCells(s.SecretSamples[i], redact) })
	}
	b.WriteString("<h2>Every setting: privacy against overhead</h2>\n<table id=\"settings\">\n<tr><th>setting</th><th>shield rows</th><th>shield scale</th><th>cond(A)</th><th>U observed in</th><th>rows per call (n + shields)</th><th>FLOPs (x plain)</th><th>overhead %</th>")
	for _, a := range s.Attacks {
		if a.NotApplicable == "" {
			fmt.Fprintf(&b, "<th>%s</th>", e(a.Name))
		}
	}
	b.WriteString("</tr>\n")
	for si, st := range s.Settings {
		cost := CostOf(st, s.D, s.P)
		x, pct := "-", "-"
		if s.D > 0 {
			x, pct = fmtNum(cost.Ratio()), fmtPct(cost.Overhead())
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td><td class=\"num\">%d + %d</td><td class=\"num\">%s</td><td class=\"num\">%s</td>",
			e(st.Name), e(shieldRowsText(st)), strconv.FormatFloat(st.ShieldScale, 'g', -1, 64), kappaText(st), dtypeText(st), cost.N, cost.Shields, x, pct)
		for _, a := range s.Attacks {
			if a.NotApplicable == "" {
				fmt.Fprintf(&b, "<td>%s</td>", e(a.Cells[si].gridCell(a.Undecided)))
			}
		}
		b.WriteString("</tr>\n")
	}
	fmt.Fprintf(&b, "</table>\n<p>%s</p>\n<h3>The frontier</h3>\n<ul>\n", e(costNote))
	for _, a := range s.Attacks {
		if a.NotApplicable == "" {
			fmt.Fprintf(&b, "<li><b>%s</b>: %s</li>\n", e(a.Name), e(a.frontierText()))
		}
	}
	b.WriteString("</ul>\n")
	if s.D > 0 {
		fmt.Fprintf(&b, "<figure id=\"frontier\">\n%s<figcaption>Success rate of each attack (with its %d%% interval) against the FLOPs of a protected call, per setting; hollow markers: the attack fails (no success on any prompt, or a ranking no better than chance); the ringed marker is the deployment.</figcaption>\n</figure>\n",
			s.FrontierSVG(), int(100*Confidence))
	}
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			continue
		}
		if a.Attack == contentName {
			fmt.Fprintf(&b, "<h3>Details: %s</h3>\n", e(a.Name))
			htmlTable(&b, "class=\"details\"", contentDetailHeader, len(a.Cells), func(i int) []string { return a.Cells[i].contentDetails() })
			continue
		}
		fmt.Fprintf(&b, "<h3>Details: %s</h3>\n<table class=\"details\">\n<tr><th>setting</th><th>prompts</th><th>successes</th><th>claims</th><th>wrong claims</th><th>token accuracy</th><th>bag recall</th><th>bag precision</th><th>rank per block</th><th>clean rows per call</th><th>shield rows per call</th><th>candidate passes</th></tr>\n", e(a.Name))
		for _, c := range a.Cells {
			fmt.Fprintf(&b, "<tr><td>%s</td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%d</td></tr>\n",
				e(c.Setting.Name), c.Prompts, c.Successes, c.Claims, c.Wrong, fmtFrac(c.TokenAcc), fmtFrac(c.BagRecall), fmtFrac(c.BagPrecision), e(c.ranks()), fmtMean(c.Clean), fmtMean(c.Shields), c.Passes)
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}
