package assess

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/eval"
)

// tableLines are the body rows of every Markdown table of md (header and separator rows left out).
func tableLines(md []byte) []string {
	lines := strings.Split(string(md), "\n")
	var out []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---") {
			continue // a header
		}
		out = append(out, l)
	}
	return out
}

// Every number of report.md is recomputed here from results.jsonl alone (read as plain JSON, not
// through the package's types) and the deployment: each table row of the report must be one the
// recomputation writes, and each one it writes must be in the report; the cost line, the row
// count and the frontier too. Content recovery is reported per template ("content (pin)"), its
// look-alikes (secret absent) counted apart from its victims.
func TestReportIsComputedFromResults(t *testing.T) {
	d := gridDeployment(t)
	dir, res := run(t, d, Options{})
	md := readFile(t, filepath.Join(dir, ReportMD))
	raw := readFile(t, filepath.Join(dir, ResultsFile))
	d = res.Deployment

	type cell struct {
		n, k, claims, wrong, undecided, batches, passes int
		absent, absentProven                            int
		tok, bagRec, bagPrec, chance                    []float64
		clean, shields                                  []float64
		rmin, rmax                                      []int
		blocks                                          []int
	}
	cells := map[[2]string]*cell{}
	var rowsN, dWidth, pWidth int
	var samples, secretSamples []map[string]any
	taken := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rowsN++
		dWidth, pWidth = int(r["d"].(float64)), int(r["p"].(float64))
		set := r["setting"].(map[string]any)["name"].(string)
		atk := r["attack"].(string)
		tmpl, isSecret := r["template"].(string)
		if isSecret {
			atk += " (" + tmpl + ")"
		}
		c := cells[[2]string{set, atk}]
		if c == nil {
			c = &cell{}
			cells[[2]string{set, atk}] = c
		}
		_, absent := r["secret_absent"]
		if isSecret && set == DeploymentSetting {
			if k := fmt.Sprint(tmpl, absent); taken[k] < SecretSampleSize {
				taken[k]++
				secretSamples = append(secretSamples, r)
			}
		}
		if isSecret && !absent {
			// The attacker's answer: the first block's claim ("" for "not among the
			// candidates"), else the deepest block's first-ranked candidate.
			guesses, answer, claimed := r["guesses"].([]any), "", false
			for k, v := range r["verdicts"].([]any) {
				if v == "claim" || v == "not among the candidates" {
					if v == "claim" {
						answer = guesses[k].(string)
					}
					claimed = true
					break
				}
			}
			if !claimed {
				answer = guesses[len(guesses)-1].(string)
			}
			if (answer == r["secret"]) != r["success"].(bool) {
				t.Errorf("victim %v: answer %q, secret %q, success %v", r["prompt"], answer, r["secret"], r["success"])
			}
		}
		if absent {
			c.absent++
			if r["claimed"].(bool) {
				c.absentProven++
			}
			c.wrong += int(r["wrong_claims"].(float64))
		} else {
			c.n++
			if r["success"].(bool) {
				c.k++
			}
			if r["claimed"].(bool) {
				c.claims++
			}
			c.wrong += int(r["wrong_claims"].(float64))
			if v, ok := r["cannot_tell"]; ok && v.(bool) {
				c.undecided++
			}
			if v, ok := r["candidates"]; ok {
				c.chance = append(c.chance, 1/v.(float64))
			}
		}
		if atk == "decode" {
			c.tok = append(c.tok, r["token_acc"].(float64))
			if set == DeploymentSetting && len(samples) < SampleSize {
				samples = append(samples, r)
			}
		}
		if v, ok := r["bag_recall"]; ok {
			c.bagRec = append(c.bagRec, v.(float64))
		}
		if r["pos"].(float64) != 0 {
			continue
		}
		st := r["batch_stats"].(map[string]any)
		c.batches++
		c.passes += int(st["candidate_passes"].(float64))
		c.clean = append(c.clean, st["clean_rows"].(float64))
		c.shields = append(c.shields, st["shield_rows"].(float64))
		if v, ok := st["bag_precision"]; ok {
			c.bagPrec = append(c.bagPrec, v.(float64))
		}
		var rank []int
		xs, _ := st["rank"].([]any) // null where the attack measures no rank
		for _, x := range xs {
			rank = append(rank, int(x.(float64)))
		}
		if c.blocks == nil {
			for _, x := range st["blocks"].([]any) {
				c.blocks = append(c.blocks, int(x.(float64)))
			}
			c.rmin, c.rmax = slices.Clone(rank), slices.Clone(rank)
		}
		for i, x := range rank {
			c.rmin[i], c.rmax[i] = min(c.rmin[i], x), max(c.rmax[i], x)
		}
	}
	avg := func(xs []float64, dec int) string {
		if len(xs) == 0 {
			return "-"
		}
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return strconv.FormatFloat(s/float64(len(xs)), 'f', dec, 64)
	}
	// chanceText is a mean chance level as the reports write it: 3 decimals, 2 significant
	// digits below 0.001.
	chanceText := func(xs []float64) string {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		if m := s / float64(len(xs)); m < 0.001 {
			return strconv.FormatFloat(m, 'g', 2, 64)
		}
		return avg(xs, 3)
	}
	interval := func(k, n int) string {
		p, err := eval.ClopperPearson(k, n, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d/%d [%.3f, %.3f]", k, n, math.Floor(p.Lo*1000)/1000, math.Ceil(p.Hi*1000)/1000)
	}
	// The cost model, written out again: n, shields, FLOPs.
	ratio := func(st Setting) (int, int, float64) {
		n := st.TextsPerCall * st.TokensPerText
		k := st.ShieldRows
		if k == 0 {
			k = int(math.Ceil(st.ShieldFrac*float64(n) - 1e-9))
		}
		m, fd, fp := float64(n+k), float64(dWidth), float64(pWidth)
		base := 2 * float64(n) * fd * fp
		gen := 8.0 / 3 * m * m * m // a Haar draw: Householder QR and Q formed
		if st.Mix == MixKappa {
			gen = 2*gen + 2*m*m*m + 2*m*m*m // two Haar draws, A = Q1 diag(s) Q2^T and A^-1 formed
		}
		gelo := gen + 2*m*m*fd + 2*m*fd*fp + 2*m*m*fp
		return n, k, gelo / base
	}
	var want []string
	// The reports' attacks: content once per template.
	var names []string
	for _, atk := range d.Attacker.Attacks {
		if atk != "content" {
			names = append(names, atk)
			continue
		}
		for _, tm := range d.Secrets.Templates {
			names = append(names, "content ("+tm.Name+")")
		}
	}
	base := func(name string) string { a, _, _ := strings.Cut(name, " ("); return a }
	phrase := map[string]string{"decode": "reads prompts exactly", "presence": "tells prompts from decoys (decoy proven absent)",
		"content": "recovers the secret", "learned": "ranks the prompt first among it and the batch's decoys (a ranked guess)"}
	claimed := map[string]string{"decode": "claimed (proven from U)", "presence": "decoys proven absent", "content": "secrets claimed (proven from U)"}
	undecidedPhrase := map[string]string{"presence": "cannot tell", "content": "not claimed"}
	// undecided writes an attack's cannot-tell count where it has one.
	undecided := func(atk, sep string, c *cell) string {
		if undecidedPhrase[base(atk)] == "" {
			return ""
		}
		return fmt.Sprintf("%s%d %s", sep, c.undecided, undecidedPhrase[base(atk)])
	}
	// claims writes an attack's claims: the learned attack's ranked guesses claim nothing;
	// content's look-alikes follow its victims.
	claims := func(atk string, c *cell) string {
		if atk == "learned" {
			return fmt.Sprintf("none: a ranked guess, never a claim (%d wrong claims)", c.wrong)
		}
		s := fmt.Sprintf("%d %s, %d wrong claims%s", c.claims, claimed[base(atk)], c.wrong, undecided(atk, "; ", c))
		if c.absent > 0 {
			s += fmt.Sprintf("; %d look-alikes (secret absent): %d proven absent", c.absent, c.absentProven)
		}
		return s
	}
	for _, atk := range names {
		c := cells[[2]string{DeploymentSetting, atk}]
		verdict := phrase[base(atk)] + ": " + interval(c.k, c.n)
		if c.k == 0 {
			verdict = "no success at this budget: " + interval(c.k, c.n)
		}
		if len(c.chance) > 0 {
			verdict += "; chance level " + chanceText(c.chance)
		}
		expected := d.Prompts.Count
		if base(atk) == "content" {
			expected = d.Secrets.Victims
		}
		want = append(want, fmt.Sprintf("| %s | %s | %s | %d of %d | %d | %d |", atk, verdict, claims(atk, c), c.n, expected, c.batches, c.passes))
	}
	for _, r := range samples {
		yn := map[bool]string{true: "yes", false: "no"}
		want = append(want, fmt.Sprintf("| %d | %s | %s | %s | %s |", int(r["prompt"].(float64)), r["text"], r["decoded_text"], yn[r["success"].(bool)], yn[r["claimed"].(bool)]))
	}
	if len(secretSamples) != 4 {
		t.Errorf("%d content samples, want the 2 victims and 2 look-alikes", len(secretSamples))
	}
	for _, r := range secretSamples {
		among := "yes"
		if k, ok := r["secret_absent"]; ok {
			among = "no (" + k.(string) + ")"
		}
		blocks := r["batch_stats"].(map[string]any)["blocks"].([]any)
		var verdicts, guesses []string
		for k, v := range r["verdicts"].([]any) {
			verdicts = append(verdicts, fmt.Sprintf("%v: %s", blocks[k], v))
			guesses = append(guesses, r["guesses"].([]any)[k].(string))
		}
		wrong := int(r["wrong_claims"].(float64))
		outcome := "not claimed"
		switch _, absent := r["secret_absent"]; {
		case wrong > 0:
			outcome = fmt.Sprintf("%d wrong claims", wrong)
		case !absent && r["claimed"].(bool):
			outcome = "recovered (proven)"
		case !absent && r["success"].(bool):
			outcome = "recovered (ranked first, not claimed)"
		case !absent:
			outcome = "not recovered"
		case absent && r["claimed"].(bool):
			outcome = "proven absent"
		}
		want = append(want, fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s |", r["template"], int(r["prompt"].(float64)), r["secret"], among,
			strings.Join(verdicts, "; "), strings.Join(guesses, "; "), outcome))
	}
	frontier := map[string]string{}
	best := map[string]float64{}
	for _, st := range d.Settings() {
		n, k, x := ratio(st)
		rows := "10% of n"
		if st.ShieldRows > 0 {
			rows = strconv.Itoa(st.ShieldRows)
		}
		observed := map[string]string{"none": "float32", "bf16": "bf16", "fp16": "fp16"}[st.ObserveDType]
		line := fmt.Sprintf("| %s | %s | %s | %s | %s | %d + %d | %s | %s |", st.Name, rows, strconv.FormatFloat(st.ShieldScale, 'g', -1, 64),
			strconv.FormatFloat(st.Kappa, 'g', -1, 64), observed, n, k, strconv.FormatFloat(x, 'g', 4, 64), strconv.FormatFloat(100*(x-1), 'f', 1, 64))
		for _, atk := range names {
			c := cells[[2]string{st.Name, atk}]
			chance := ""
			if len(c.chance) > 0 {
				chance = ", chance " + chanceText(c.chance)
			}
			if c.absent > 0 {
				chance += fmt.Sprintf(", %d of %d look-alikes proven absent", c.absentProven, c.absent)
			}
			line += fmt.Sprintf(" %s, %d wrong%s%s |", interval(c.k, c.n), c.wrong, undecided(atk, ", ", c), chance)
			// A ranking attack fails where its interval reaches its chance level, any other where it
			// succeeds on no prompt.
			fails, why := c.k == 0, "no success on any prompt"
			if len(c.chance) > 0 {
				p, _ := eval.ClopperPearson(c.k, c.n, 0.95)
				ch := 0.0
				for _, v := range c.chance {
					ch += v
				}
				ch /= float64(len(c.chance))
				fails, why = p.Lo <= ch, "its interval reaches its chance level "+chanceText(c.chance)+": no better than a uniform guess"
			}
			if fails {
				if b, ok := best[atk]; !ok || x < b {
					best[atk] = x
					frontier[atk] = fmt.Sprintf("(%s) is %s: %s, %d wrong claims, at %s%% overhead", why, st.Name, interval(c.k, c.n), c.wrong, strconv.FormatFloat(100*(x-1), 'f', 1, 64))
				}
			}
		}
		want = append(want, line)
	}
	for _, atk := range names {
		for _, st := range d.Settings() {
			c := cells[[2]string{st.Name, atk}]
			var ranks []string
			for i, b := range c.blocks[:len(c.rmin)] {
				r := strconv.Itoa(c.rmin[i])
				if c.rmax[i] != c.rmin[i] {
					r += "-" + strconv.Itoa(c.rmax[i])
				}
				ranks = append(ranks, fmt.Sprintf("%d: %s", b, r))
			}
			if len(ranks) == 0 {
				ranks = []string{"-"}
			}
			if base(atk) == "content" {
				want = append(want, fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %s | %d | %d | %s | %s | %s | %d |", st.Name, c.n, c.k, c.claims, c.wrong,
					c.undecided, chanceText(c.chance), c.absent, c.absentProven, strings.Join(ranks, ", "), avg(c.clean, 1), avg(c.shields, 1), c.passes))
				continue
			}
			want = append(want, fmt.Sprintf("| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %d |", st.Name, c.n, c.k, c.claims, c.wrong,
				avg(c.tok, 3), avg(c.bagRec, 3), avg(c.bagPrec, 3), strings.Join(ranks, ", "), avg(c.clean, 1), avg(c.shields, 1), c.passes))
		}
	}
	got := tableLines(md)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("report.md lacks the recomputed row\n%s", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("report.md has a row the recomputation does not give\n%s", g)
		}
	}
	if len(frontier) == 0 {
		t.Errorf("no attack failed anywhere in the grid: the frontier is not exercised")
	}
	for atk, f := range frontier {
		if !bytes.Contains(md, []byte("- **"+atk+"**: the cheapest setting it fails at "+f)) {
			t.Errorf("report.md lacks %s's frontier %q", atk, f)
		}
	}
	if !bytes.Contains(md, []byte(fmt.Sprintf("results.jsonl (%d rows)", rowsN))) {
		t.Errorf("report.md does not count %d rows", rowsN)
	}
	n, k, x := ratio(d.Settings()[0])
	if !bytes.Contains(md, []byte(fmt.Sprintf("overhead %s%% of the plain call's FLOPs (x%s; rows x%.2f: n %d + %d shields, d %d, p %d)",
		strconv.FormatFloat(100*(x-1), 'f', 1, 64), strconv.FormatFloat(x, 'g', 4, 64), float64(n+k)/float64(n), n, k, dWidth, pWidth))) {
		t.Errorf("report.md's cost line is not the recomputed one")
	}
}

// report.html stands alone: every table of the report and the frontier as inline SVG, nothing
// fetched from elsewhere; -redact leaves the prompts out of both reports.
func TestHTMLHoldsTablesAndSVG(t *testing.T) {
	d := gridDeployment(t)
	dir, res := run(t, d, Options{Redact: true})
	h := string(readFile(t, filepath.Join(dir, ReportHTML)))
	for _, want := range []string{"<table id=\"verdicts\">", "<table id=\"samples\">", "<table id=\"secrets\">", "<table id=\"settings\">", "<table class=\"details\">",
		"<figure id=\"frontier\">", "<svg xmlns=\"http://www.w3.org/2000/svg\"", "<circle", "data-attack=\"decode\"", "data-attack=\"presence\"",
		"data-attack=\"content (pin)\"", "data-attack=\"learned\"", "</html>"} {
		if !strings.Contains(h, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	for _, bad := range []string{"src=", "href=", "@import", "url("} {
		if strings.Contains(h, bad) {
			t.Errorf("report.html refers to something outside it (%s)", bad)
		}
	}
	// Every verdict of the summary is in the HTML, escaped as text.
	for _, a := range res.Summary.Attacks {
		if v := html.EscapeString(a.Cells[0].Verdict(a.Success)); !strings.Contains(h, v) {
			t.Errorf("report.html lacks the verdict %q", v)
		}
	}
	md := string(readFile(t, filepath.Join(dir, ReportMD)))
	rows, _ := ReadRows(filepath.Join(dir, ResultsFile))
	for _, r := range rows[:4] {
		if strings.TrimSpace(r.Text) == "" {
			continue
		}
		if strings.Contains(md, "| "+r.Text+" |") || strings.Contains(h, "<td>"+r.Text+"</td>") {
			t.Errorf("-redact: the prompt %q is in a report", r.Text)
		}
	}
	if !strings.Contains(md, "(redacted)") {
		t.Errorf("-redact: report.md does not say the texts are redacted")
	}
	// Content recovery's secrets, and the candidates ranked first (one of them the secret), are
	// hidden too; results.jsonl keeps them.
	secrets := 0
	for _, r := range rows {
		if r.Secret == "" {
			continue
		}
		secrets++
		for _, s := range append([]string{r.Secret}, r.Guesses...) {
			if strings.Contains(md, "| "+s+" |") || strings.Contains(md, " "+s+";") || strings.Contains(md, " "+s+" |") || strings.Contains(h, "<td>"+s+"</td>") || strings.Contains(h, " "+s+";") {
				t.Errorf("-redact: the secret or guess %q is in a report", s)
			}
		}
	}
	if secrets == 0 {
		t.Errorf("results.jsonl holds no secrets: -redact of secrets is not exercised")
	}
}
