package assess

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// WriteReports computes the reports of an assessment directory from its results.jsonl and
// deployment.yaml (ReadSummary) and writes report.md, report.html and frontier.svg in it, each
// through a temporary file renamed into place. redact leaves the prompts' texts out.
func WriteReports(dir string, files *safefile.Files, redact bool) (*Summary, error) {
	s, err := ReadSummary(dir)
	if err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{ReportMD: s.Markdown(redact), ReportHTML: s.HTML(redact), FrontierSVG: s.FrontierSVG()} {
		if err := files.WriteFileAtomic(filepath.Join(dir, name), b); err != nil {
			return s, fmt.Errorf("assess: %w", err)
		}
	}
	return s, nil
}

// fmtFrac writes a fraction with 3 decimals, "-" for NaN.
func fmtFrac(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// fmtChance writes a chance level: 3 decimals, or below 0.001 its 2 significant digits (1 in
// 10,000 candidates is 0.0001, not 0.000).
func fmtChance(x float64) string {
	if x > 0 && x < 0.001 {
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
	return fmtFrac(x)
}

// fmtPct writes a percentage with 1 decimal.
func fmtPct(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// fmtNum writes a ratio with 4 significant digits.
func fmtNum(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// fmtMean writes a mean count with 1 decimal, "-" for NaN.
func fmtMean(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// ranks writes "0: 30-32, 1: 64" (block: min-max rank).
func (c Cell) ranks() string {
	if len(c.Blocks) == 0 || len(c.RankMin) == 0 {
		return "-"
	}
	var parts []string
	for k, b := range c.Blocks {
		if k >= len(c.RankMin) {
			break
		}
		r := strconv.Itoa(c.RankMin[k])
		if c.RankMax[k] != c.RankMin[k] {
			r += "-" + strconv.Itoa(c.RankMax[k])
		}
		parts = append(parts, fmt.Sprintf("%d: %s", b, r))
	}
	return strings.Join(parts, ", ")
}

// gridCell is a cell in the settings table: "8/8 [0.631, 1.000], 0 wrong", and for an attack
// that can say it cannot tell (undecided its phrase), ", 2 cannot tell"; for a ranking attack,
// ", chance 0.200".
func (c Cell) gridCell(undecided string) string {
	if c.Prompts == 0 {
		return "-"
	}
	s := fmt.Sprintf("%s, %d wrong", c.Interval, c.Wrong)
	if undecided != "" {
		s += fmt.Sprintf(", %d %s", c.CannotTell, undecided)
	}
	if !math.IsNaN(c.Chance) {
		s += ", chance " + fmtChance(c.Chance)
	}
	if c.Absent > 0 {
		s += fmt.Sprintf(", %d of %d look-alikes proven absent", c.AbsentProven, c.Absent)
	}
	return s
}

// shieldRowsText is the setting's shield rows for tables: the count, or the fraction.
func shieldRowsText(st Setting) string {
	if st.ShieldRows > 0 {
		return strconv.Itoa(st.ShieldRows)
	}
	return strconv.FormatFloat(100*st.ShieldFrac, 'g', 4, 64) + "% of n"
}

// kappaText is the setting's cond(A) for tables.
func kappaText(st Setting) string { return strconv.FormatFloat(st.Kappa, 'g', -1, 64) }

// dtypeText is the dtype U is observed in, for tables.
func dtypeText(st Setting) string {
	if st.ObserveDType == DTypeNone {
		return "float32"
	}
	return st.ObserveDType
}

// mdText makes file-derived text safe in a Markdown table cell: control and format characters
// dropped, newlines as spaces, pipes, backslashes, backticks and angle brackets escaped.
func mdText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
		case strings.ContainsRune("|\\`<>", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// header is the reports' opening lines, shared by Markdown and HTML.
func (s *Summary) header() (title string, lines []string) {
	d := s.Deployment
	title = "GELO assessment: " + filepath.Base(d.Model)
	lines = append(lines,
		fmt.Sprintf("Model %s (d = %d, Q/K/V width p = %d); GELO offloads blocks %s.", d.Model, s.D, s.P, joinInts(d.Offload.Blocks)),
		fmt.Sprintf("Prompts: the first %d val-split texts (val_frac %s, the stores' rule) of %s, cut to %d tokens, in batches of %d texts (seed %d).",
			d.Prompts.Count, strconv.FormatFloat(d.Prompts.ValFrac, 'g', -1, 64), d.Prompts.Texts, d.Batch.TokensPerText, d.Batch.TextsPerCall, d.Seed),
		fmt.Sprintf("Every figure below is computed from results.jsonl (%d rows) and deployment.yaml alone. Intervals are exact %d%% (Clopper-Pearson) intervals of the counts. Wall times are in timing.jsonl, kept out of the results so that a resumed or merged assessment gives the same bytes.",
			s.Rows, int(100*Confidence)),
		"A verdict says what the attack did at its budget, never that a setting is safe: 0 successes bounds the attack's rate by the interval's upper end, for these prompts, this attacker and this budget.",
	)
	return title, lines
}

// costNote says what the cost figures are.
const costNote = "Cost: FLOPs of one protected call (A generation, mix, offloaded GEMM, unmix; protocol/overhead's parts) against the plain GEMM, at n = texts per call x tokens per text. A model, not a timing: A is drawn on the host in float64, slower per FLOP than the GEMMs; `geloattack protocol bench -n N -d D -p P` measures it."

// Markdown is report.md.
func (s *Summary) Markdown(redact bool) []byte {
	var b bytes.Buffer
	title, lines := s.header()
	fmt.Fprintf(&b, "# %s\n\n", mdText(title))
	for _, l := range lines {
		fmt.Fprintf(&b, "%s\n", mdText(l))
	}
	dep := s.Settings[0]
	fmt.Fprintf(&b, "\n## Verdicts at the deployment\n\nSetting: %s.\n\n", mdText(dep.Describe()))
	if s.D > 0 {
		fmt.Fprintf(&b, "Cost: %s.\n\n", CostOf(dep, s.D, s.P))
	}
	b.WriteString("| attack | verdict | claims | prompts | batches | candidate passes |\n|---|---|---|---|---|---|\n")
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			fmt.Fprintf(&b, "| %s | does not apply: %s | - | - | - | - |\n", a.Name, mdText(a.NotApplicable))
			continue
		}
		c := a.Cells[0]
		fmt.Fprintf(&b, "| %s | %s | %s | %d of %d | %d | %d |\n", a.Name, c.Verdict(a.Success), c.ClaimsText(a.Claimed, a.Undecided), c.Prompts, c.Expected, c.Batches, c.Passes)
	}
	b.WriteString("\nThe attacker's budget:\n\n")
	for _, a := range s.Attacks {
		fmt.Fprintf(&b, "- **%s**: %s.\n", a.Name, mdText(a.Budget))
	}
	s.mdSamples(&b, redact)
	s.mdSecretSamples(&b, redact)
	s.mdSettings(&b)
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			continue
		}
		fmt.Fprintf(&b, "\n### Details: %s\n\n", a.Name)
		if a.Attack == contentName {
			mdTable(&b, contentDetailHeader, len(a.Cells), func(i int) []string { return a.Cells[i].contentDetails() })
			continue
		}
		b.WriteString("| setting | prompts | successes | claims | wrong claims | token accuracy | bag recall | bag precision | rank per block | clean rows per call | shield rows per call | candidate passes |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range a.Cells {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %d |\n", c.Setting.Name, c.Prompts, c.Successes, c.Claims, c.Wrong,
				fmtFrac(c.TokenAcc), fmtFrac(c.BagRecall), fmtFrac(c.BagPrecision), c.ranks(), fmtMean(c.Clean), fmtMean(c.Shields), c.Passes)
		}
	}
	return b.Bytes()
}

// mdSamples writes the decoded texts beside the true ones.
func (s *Summary) mdSamples(b *bytes.Buffer, redact bool) {
	if len(s.Samples) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## What %s read (the deployment, first %d prompts)\n\n", s.Samples[0].Attack, len(s.Samples))
	b.WriteString("| prompt | true text | decoded text | exact | claimed |\n|---|---|---|---|---|\n")
	for _, r := range s.Samples {
		truth, got := mdText(r.Text), mdText(r.DecodedText)
		if redact {
			truth, got = "(redacted)", "(redacted)"
		}
		if r.Decoded == nil {
			got = "(nothing decoded)"
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", r.Prompt, truth, got, yesNo(r.Success), yesNo(r.Claimed))
	}
}

// mdSettings writes the settings table and the frontier.
func (s *Summary) mdSettings(b *bytes.Buffer) {
	b.WriteString("\n## Every setting: privacy against overhead\n\n")
	b.WriteString("| setting | shield rows | shield scale | cond(A) | U observed in | rows per call (n + shields) | FLOPs (x plain) | overhead % |")
	for _, a := range s.Attacks {
		if a.NotApplicable == "" {
			fmt.Fprintf(b, " %s |", a.Name)
		}
	}
	b.WriteString("\n|---|---|---|---|---|---|---|---|")
	for _, a := range s.Attacks {
		if a.NotApplicable == "" {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for si, st := range s.Settings {
		cost := CostOf(st, s.D, s.P)
		x, pct := "-", "-"
		if s.D > 0 {
			x, pct = fmtNum(cost.Ratio()), fmtPct(cost.Overhead())
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d + %d | %s | %s |", st.Name, shieldRowsText(st), strconv.FormatFloat(st.ShieldScale, 'g', -1, 64),
			kappaText(st), dtypeText(st), cost.N, cost.Shields, x, pct)
		for _, a := range s.Attacks {
			if a.NotApplicable == "" {
				fmt.Fprintf(b, " %s |", a.Cells[si].gridCell(a.Undecided))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + costNote + "\n\n### The frontier\n\n")
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			continue
		}
		fmt.Fprintf(b, "- **%s**: %s\n", a.Name, a.frontierText())
	}
	if s.D > 0 {
		b.WriteString("\n![privacy against overhead](frontier.svg)\n")
	}
}

// frontierText says where the attack first fails.
func (a AttackSummary) frontierText() string {
	if a.Frontier < 0 {
		return "did not fail at any setting with results: no setting assessed stops it at this budget."
	}
	c := a.Cells[a.Frontier]
	fails := "no success on any prompt"
	if !math.IsNaN(c.Chance) {
		fails = "its interval reaches its chance level " + fmtChance(c.Chance) + ": no better than a uniform guess"
	}
	return fmt.Sprintf("the cheapest setting it fails at (%s) is %s: %s, %d wrong claims, at %s%% overhead (x%s the plain call's FLOPs).",
		fails, c.Setting.Name, c.Interval, c.Wrong, fmtPct(c.Cost.Overhead()), fmtNum(c.Cost.Ratio()))
}

// yesNo writes a flag.
func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
