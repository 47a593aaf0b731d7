package assess

import (
	"bytes"
	"fmt"
	"html"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/baselines/content"
)

// The tables of content recovery's reports, the same cells in report.md and report.html.

// secretSampleHeader heads the table of content recovery's first victims.
var secretSampleHeader = []string{"template", "victim", "secret", "among the candidates", "verdict per block", "ranked first per block", "outcome"}

// secretSampleCells are victim r's cells: its secret and the candidates ranked first (redacted on
// request), whether its secret is among the candidates, the verdict at each scored block, and
// the outcome.
func secretSampleCells(r Row, redact bool) []string {
	secret, guesses := r.Secret, strings.Join(r.Guesses, "; ")
	if redact {
		secret, guesses = "(redacted)", "(redacted)"
	}
	among := "yes"
	if r.SecretAbsent != "" {
		among = "no (" + r.SecretAbsent + ")"
	}
	var verdicts []string
	for k, v := range r.Verdicts {
		b := "?"
		if k < len(r.Stats.Blocks) {
			b = strconv.Itoa(r.Stats.Blocks[k])
		}
		verdicts = append(verdicts, b+": "+v)
	}
	return []string{r.Template, strconv.Itoa(r.Prompt), secret, among, strings.Join(verdicts, "; "), guesses, secretOutcome(r)}
}

// secretOutcome is a victim's outcome in words.
func secretOutcome(r Row) string {
	switch {
	case r.WrongClaims > 0:
		return fmt.Sprintf("%d wrong claims", r.WrongClaims)
	case r.SecretAbsent == "" && r.Claimed:
		return "recovered (proven)"
	case r.SecretAbsent == "" && r.Success:
		return "recovered (ranked first, not claimed)"
	case r.SecretAbsent == "":
		return "not recovered"
	case r.Claimed:
		return "proven absent"
	}
	return "not claimed"
}

// contentDetailHeader heads a template's details table.
var contentDetailHeader = []string{"setting", "victims", "recovered", "claimed (proven)", "wrong claims", "not claimed", "chance",
	"look-alikes", "proven absent", "rank per block", "clean rows per call", "shield rows per call", "candidate passes"}

// contentDetails are a template's figures at one setting: its victims, those recovered (claimed,
// or ranked first), those claimed, the wrong claims (look-alikes' included), the victims not
// claimed, a uniform guess's chance, the look-alikes and those proven absent, the ranks of U, the
// rows of a call and the candidate passes (neighbours and next tokens tested).
func (c Cell) contentDetails() []string {
	return []string{c.Setting.Name, strconv.Itoa(c.Prompts), strconv.Itoa(c.Successes), strconv.Itoa(c.Claims), strconv.Itoa(c.Wrong),
		strconv.Itoa(c.CannotTell), fmtChance(c.Chance), strconv.Itoa(c.Absent), strconv.Itoa(c.AbsentProven), c.ranks(), fmtMean(c.Clean),
		fmtMean(c.Shields), strconv.Itoa(c.Passes)}
}

// secretSampleTitle heads the victims' table.
func secretSampleTitle() string {
	return fmt.Sprintf("What content recovery claimed (the deployment, per template its first %d victims and %d look-alikes)", SecretSampleSize, SecretSampleSize)
}

// secretSampleNote says what the victims' table shows.
var secretSampleNote = "A claim is " + strconv.Quote(content.VerdictClaim) + " (the secret, proven from U) or " + strconv.Quote(content.VerdictAbsent) +
	" (no candidate can be the secret); " + strconv.Quote(content.VerdictRanked) + " claims nothing. The attacker's answer is its claim, else the candidate the deepest scored block ranks first (a guess); the secret is recovered when the answer is the secret. A look-alike's secret is not among the candidates: one character longer than one (longer) or removed from those scored (neighbour)."

// mdSecretSamples writes content recovery's first victims.
func (s *Summary) mdSecretSamples(b *bytes.Buffer, redact bool) {
	if len(s.SecretSamples) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n", secretSampleTitle(), secretSampleNote)
	mdTable(b, secretSampleHeader, len(s.SecretSamples), func(i int) []string { return secretSampleCells(s.SecretSamples[i], redact) })
}

// mdTable writes a Markdown table of n rows, each row's cells made safe (mdText).
func mdTable(b *bytes.Buffer, header []string, n int, row func(i int) []string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|" + strings.Repeat("---|", len(header)) + "\n")
	for i := range n {
		cells := row(i)
		for k := range cells {
			cells[k] = mdText(cells[k])
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

// htmlTable writes an HTML table of n rows with attributes attr ("id=\"x\""), every cell escaped.
func htmlTable(b *bytes.Buffer, attr string, header []string, n int, row func(i int) []string) {
	fmt.Fprintf(b, "<table %s>\n<tr>", attr)
	for _, h := range header {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(h))
	}
	b.WriteString("</tr>\n")
	for i := range n {
		b.WriteString("<tr>")
		for _, c := range row(i) {
			fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}
