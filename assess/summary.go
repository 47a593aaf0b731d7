package assess

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// Confidence is the level of every interval of the reports.
const Confidence = 0.95

// Summary is everything the reports say, computed from results.jsonl's rows and the resolved
// deployment alone (Summarize).
type Summary struct {
	// Deployment is the resolved deployment.
	Deployment Deployment
	// Rows is the number of lines of results.jsonl; D and P the model's widths read from them
	// (0 when there are none).
	Rows, D, P int
	// Settings are the deployment's settings, in report order.
	Settings []Setting
	// Attacks are the deployment's attacks, in report order.
	Attacks []AttackSummary
	// Samples are the first prompts of the deployment's setting under the first attack that
	// decodes text, with what it decoded.
	Samples []Row
	// SecretSamples are content recovery's first victims at the deployment's setting: per
	// template its first SecretSampleSize whose secret is among the candidates, then its first
	// SecretSampleSize look-alikes.
	SecretSamples []Row
}

// AttackSummary is one attack over every setting; content recovery has one per template.
type AttackSummary struct {
	// Name is what the reports call it: the attack's name, with the template's for content
	// recovery ("content (pin)"); Attack is the attack's name and Template the template's.
	Name, Attack, Template string
	// Success, Claimed, Undecided and Budget are the attack's (Attack; for a template, its own
	// budget).
	Success, Claimed, Undecided, Budget string
	// NotApplicable says why the attack was not run ("" when it applies).
	NotApplicable string
	// Cells are the attack's figures per setting, in the order of Summary.Settings.
	Cells []Cell
	// Frontier is the index of the cheapest setting (by FLOPs) where the attack fails (Cell.fails);
	// -1 when it did not fail at any setting with results.
	Frontier int
}

// Cell is one attack at one setting.
type Cell struct {
	// Setting and its Cost (at the rows' model widths; HasCost false without rows).
	Setting Setting
	Cost    Cost
	HasCost bool
	// Prompts are the prompts with a row, Expected the deployment's prompt count (content
	// recovery: its victims whose secret is among the candidates, and secrets.victims).
	Prompts, Expected int
	// Successes, Claims, Wrong and CannotTell count the rows' success and claimed flags, wrong
	// claims and cannot-tell flags; Interval is Successes of Prompts with its exact interval
	// (zero when Prompts is 0).
	Successes, Claims, Wrong, CannotTell int
	Interval                             eval.Proportion
	// Absent and AbsentProven count content recovery's look-alike victims (their secret not
	// among the candidates) and those proven absent; their wrong claims are in Wrong.
	Absent, AbsentProven int
	// TokenAcc and BagRecall are means over the prompts (NaN where no row has them); BagPrecision
	// a mean over the batches.
	TokenAcc, BagRecall, BagPrecision float64
	// Chance is a ranking attack's chance level, the mean of 1/candidates over its prompts (NaN
	// for an attack that ranks nothing): the success rate of a uniform guess.
	Chance float64
	// Batches are the batches with rows; Passes their candidate passes; Shields and Clean their
	// mean shield and clean rows per call.
	Batches        int
	Passes         int
	Shields, Clean float64
	// Blocks are the scored blocks, RankMin and RankMax the range of each one's rank over the
	// batches.
	Blocks           []int
	RankMin, RankMax []int
}

// Verdict is the cell's verdict line, never "safe": "reads prompts exactly: 8/8 [0.631,
// 1.000]" or "no success at this budget: 0/8 [0.000, 0.369]", and for a ranking attack its
// chance level after it ("; chance level 0.200").
func (c Cell) Verdict(success string) string {
	chance := ""
	if !math.IsNaN(c.Chance) {
		chance = "; chance level " + fmtChance(c.Chance)
	}
	switch {
	case c.Prompts == 0:
		return "no results yet"
	case c.Successes == 0:
		return "no success at this budget: " + c.Interval.String() + chance
	}
	return success + ": " + c.Interval.String() + chance
}

// ClaimsText is the cell's claims in words: "8 claimed (proven from U), 0 wrong claims", and
// for an attack that can say it cannot tell (undecided its phrase), "; 2 cannot tell".
func (c Cell) ClaimsText(claimed, undecided string) string {
	if c.Prompts == 0 {
		return "-"
	}
	if claimed == "" {
		return fmt.Sprintf("none: a ranked guess, never a claim (%d wrong claims)", c.Wrong)
	}
	s := fmt.Sprintf("%d %s, %d wrong claims", c.Claims, claimed, c.Wrong)
	if undecided != "" {
		s += fmt.Sprintf("; %d %s", c.CannotTell, undecided)
	}
	if c.Absent > 0 {
		s += fmt.Sprintf("; %d look-alikes (secret absent): %d proven absent", c.Absent, c.AbsentProven)
	}
	return s
}

// ReadSummary reads an assessment directory's deployment.yaml and results.jsonl and summarizes
// them.
func ReadSummary(dir string) (*Summary, error) {
	depPath := filepath.Join(dir, DeploymentFile)
	src, err := safefile.ReadNoFollow(depPath, safefile.RunRecord)
	if err != nil {
		return nil, fmt.Errorf("assess: %w", err)
	}
	d, err := ParseDeployment(depPath, src)
	if err != nil {
		return nil, err
	}
	rows, err := ReadRows(filepath.Join(dir, ResultsFile))
	if err != nil {
		return nil, err
	}
	return Summarize(d, rows)
}

// Summarize computes the reports' figures from the rows of results.jsonl and the resolved
// deployment. A row of a setting or attack the deployment does not name is an error.
func Summarize(d Deployment, rows []Row) (*Summary, error) {
	s := &Summary{Deployment: d, Rows: len(rows), Settings: d.Settings()}
	if len(rows) > 0 {
		s.D, s.P = rows[0].D, rows[0].P
	}
	setIdx := map[string]int{}
	for i, st := range s.Settings {
		setIdx[st.Name] = i
	}
	atkIdx := map[string]int{}
	for _, name := range d.Attacker.Attacks {
		a, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("assess: deployment names attack %q, want one of %v", name, Names())
		}
		as := AttackSummary{Name: name, Attack: name, Success: a.Success(), Claimed: a.Claimed(), Undecided: a.Undecided(), Budget: a.Budget(d), Frontier: -1}
		if err := a.Check(d); err != nil {
			as.NotApplicable = err.Error()
		}
		// Content recovery is reported per template.
		parts := []AttackSummary{as}
		if name == contentName && as.NotApplicable == "" {
			parts = parts[:0]
			for _, tm := range d.Secrets.Templates {
				p := as
				p.Name, p.Template, p.Budget = summaryName(name, tm.Name), tm.Name, contentBudget(d, tm)
				parts = append(parts, p)
			}
		}
		for _, p := range parts {
			expected := d.Prompts.Count
			if name == contentName {
				expected = d.Secrets.Victims
			}
			for _, st := range s.Settings {
				c := Cell{Setting: st, Expected: expected}
				if s.D > 0 {
					c.Cost, c.HasCost = CostOf(st, s.D, s.P), true
				}
				p.Cells = append(p.Cells, c)
			}
			atkIdx[p.Name] = len(s.Attacks)
			s.Attacks = append(s.Attacks, p)
		}
	}
	accs := make([][]cellSums, len(s.Attacks))
	for i := range accs {
		accs[i] = make([]cellSums, len(s.Settings))
	}
	for n, r := range rows {
		si, ok1 := setIdx[r.Setting.Name]
		ai, ok2 := atkIdx[summaryName(r.Attack, r.Template)]
		if !ok1 || !ok2 || r.Setting != s.Settings[si] {
			return nil, fmt.Errorf("assess: results row %d (%s, %s) is not of this deployment's settings and attacks", n+1, r.Setting.Name, r.Attack)
		}
		c, a := &s.Attacks[ai].Cells[si], &accs[ai][si]
		if r.SecretAbsent != "" {
			// A look-alike: no success to count, only its claims.
			c.Absent++
			if r.Claimed {
				c.AbsentProven++
			}
			c.Wrong += r.WrongClaims
			c.batchStats(r, a)
			continue
		}
		c.Prompts++
		if r.Success {
			c.Successes++
		}
		if r.Claimed {
			c.Claims++
		}
		c.Wrong += r.WrongClaims
		if r.CannotTell {
			c.CannotTell++
		}
		if r.Attack == (decodeAttack{}).Name() {
			a.tokAcc += r.TokenAcc
			a.nTok++
		}
		if r.BagRecall != nil {
			a.bagRec += *r.BagRecall
			a.nBag++
		}
		if r.Candidates > 0 {
			a.chance += 1 / float64(r.Candidates)
			a.nChance++
		}
		if r.Pos == 0 {
			c.batchStats(r, a)
		}
	}
	for ai := range s.Attacks {
		as := &s.Attacks[ai]
		for si := range as.Cells {
			c, a := &as.Cells[si], accs[ai][si]
			c.TokenAcc, c.BagRecall, c.BagPrecision = mean(a.tokAcc, a.nTok), mean(a.bagRec, a.nBag), mean(a.bagPrec, a.nPrec)
			c.Chance = mean(a.chance, a.nChance)
			c.Shields, c.Clean = mean(float64(a.shields), c.Batches), mean(float64(a.clean), c.Batches)
			if c.Prompts > 0 {
				p, err := eval.ClopperPearson(c.Successes, c.Prompts, Confidence)
				if err != nil {
					return nil, err
				}
				c.Interval = p
			}
			if c.Prompts > 0 && c.fails() && c.HasCost &&
				(as.Frontier < 0 || c.Cost.Ratio() < as.Cells[as.Frontier].Cost.Ratio()) {
				as.Frontier = si
			}
		}
	}
	// Samples: the deployment's setting under the first attack that decodes text; content
	// recovery's first victims and look-alikes per template.
	type sampleKey struct {
		template string
		absent   bool
	}
	taken := map[sampleKey]int{}
	for _, r := range rows {
		if r.Setting.Name != DeploymentSetting || r.Template == "" {
			continue
		}
		if k := (sampleKey{r.Template, r.SecretAbsent != ""}); taken[k] < SecretSampleSize {
			taken[k]++
			s.SecretSamples = append(s.SecretSamples, r)
		}
	}
	for _, r := range rows {
		if r.Setting.Name != DeploymentSetting {
			continue
		}
		if len(s.Samples) > 0 && r.Attack != s.Samples[0].Attack {
			continue
		}
		if r.Decoded == nil && r.Attack != (decodeAttack{}).Name() {
			continue
		}
		if len(s.Samples) < SampleSize {
			s.Samples = append(s.Samples, r)
		}
	}
	return s, nil
}

// fails says the attack failed at the cell: no success on any prompt, or for a ranking attack a
// rate whose interval reaches down to its chance level (no better than a uniform guess).
func (c Cell) fails() bool {
	if !math.IsNaN(c.Chance) {
		return c.Interval.Lo <= c.Chance
	}
	return c.Successes == 0
}

// SampleSize is how many prompts the reports show beside what the attack decoded.
const SampleSize = 8

// SecretSampleSize is how many victims, and how many look-alikes, of each template the reports
// show with content recovery's verdicts.
const SecretSampleSize = 4

// summaryName is what the reports call attack's results: its name, and a content template's in
// parentheses ("content (pin)").
func summaryName(attack, template string) string {
	if template == "" {
		return attack
	}
	return attack + " (" + template + ")"
}

// cellSums are the sums behind a cell's means.
type cellSums struct {
	tokAcc, bagRec, bagPrec, chance float64
	nTok, nBag, nPrec, nChance      int
	shields, clean                  int
}

// batchStats adds the figures of r's batch to the cell, once per batch (its first row).
func (c *Cell) batchStats(r Row, a *cellSums) {
	st := r.Stats
	c.Batches++
	c.Passes += st.Passes
	a.shields += st.Shields
	a.clean += st.Clean
	if st.BagPrecision != nil {
		a.bagPrec += *st.BagPrecision
		a.nPrec++
	}
	if c.Blocks == nil {
		c.Blocks = append([]int(nil), st.Blocks...)
		c.RankMin = append([]int(nil), st.Rank...)
		c.RankMax = append([]int(nil), st.Rank...)
	}
	for k := range min(len(st.Rank), len(c.RankMin)) {
		c.RankMin[k] = min(c.RankMin[k], st.Rank[k])
		c.RankMax[k] = max(c.RankMax[k], st.Rank[k])
	}
}

// mean is sum/n, NaN for n = 0.
func mean(sum float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}
