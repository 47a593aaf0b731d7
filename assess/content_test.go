package assess

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// contentDeployment is the tiny decoder's weak setting (10% shields of scale 1, below full rank)
// with content recovery alone: a PIN template whose fills (BOS and 12 single-character tokens)
// fit the 14 tokens per text, 200 PINs as candidates, victims and look-alikes.
func contentDeployment(t *testing.T, victims, absent int) Deployment {
	t.Helper()
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 8)
	d.Batch.TextsPerCall, d.Batch.TokensPerText = 2, 14
	d.Attacker.Attacks = []string{contentName}
	d.Secrets = Secrets{Templates: []SecretTemplate{{Name: "pin", Pattern: "pin {x} ok", Set: SetPIN, Candidates: 200}},
		Victims: victims, AbsentVictims: absent}
	return d
}

// Known answer, the weak setting: every victim's secret is recovered and claimed, every claim is
// right, and no look-alike (a five-digit number, or a PIN removed from the candidates) is ever
// claimed to be a candidate.
func TestContentWeakSettingRecoversSecrets(t *testing.T) {
	d := contentDeployment(t, 8, 8)
	dir, res := run(t, d, Options{})
	t.Logf("%s", readFile(t, filepath.Join(dir, ReportMD)))
	if len(res.Summary.Attacks) != 1 {
		t.Fatalf("%d attack summaries, want content (pin) alone", len(res.Summary.Attacks))
	}
	a := res.Summary.Attacks[0]
	c := a.Cells[0]
	if a.Name != "content (pin)" || c.Prompts != 8 || c.Successes != 8 || c.Claims != 8 || c.Wrong != 0 {
		t.Errorf("%s: %d/%d recovered, %d claimed, %d wrong; want 8/8, every claim right", a.Name, c.Successes, c.Prompts, c.Claims, c.Wrong)
	}
	if c.Absent != 8 {
		t.Errorf("%d look-alikes, want 8", c.Absent)
	}
}

// Content recovery claims only what U proves. Against a bf16 deployer whose rows (the victim's
// too) lie 0.9 rho from the attacker's, with U observed in fp32, bf16 and fp16, below, at and
// twice past full rank with scale-1 and scale-10 shields: no victim's claim is another candidate,
// no victim whose secret is a candidate is said to hold none, and no look-alike (its secret a
// five-digit number beside four-digit candidates, or a PIN removed from the candidates, each a
// neighbour of some that are scored) is ever claimed to hold a candidate.
func TestContentClaimsAreProofs(t *testing.T) {
	d := contentDeployment(t, 4, 6)
	d.Deployer.Precision = fptol.PrecisionBF16
	d.Grid = Grid{Enabled: true, ShieldRows: []int{64, 128}, ShieldScales: []float64{1, 10}, Kappas: []float64{1}, ObserveDTypes: DTypes}
	dir, res := run(t, d, Options{DeployerRows: perturbedDeployer(fptol.PrecisionBF16, 64)})
	a := res.Summary.Attacks[0]
	for _, c := range a.Cells {
		t.Logf("%s: %d/%d recovered, %d wrong, %d not claimed, %d/%d look-alikes proven absent; ranks %v-%v",
			c.Setting.Name, c.Successes, c.Prompts, c.Wrong, c.CannotTell, c.AbsentProven, c.Absent, c.RankMin, c.RankMax)
		if c.Prompts != 4 || c.Absent != 6 || c.Wrong != 0 {
			t.Errorf("%s: %d victims, %d look-alikes, %d wrong claims; want 4, 6 and none wrong", c.Setting.Name, c.Prompts, c.Absent, c.Wrong)
		}
		if c.RankMin[1] >= 64 && c.Claims > 0 {
			t.Errorf("%s: a claim at full rank", c.Setting.Name)
		}
	}
	// Claims are made (secrets recovered, look-alikes proven absent), so their rightness is tested.
	claims := 0
	for _, c := range a.Cells {
		claims += c.Claims + c.AbsentProven
	}
	if claims < 5 {
		t.Errorf("%d claims over the grid: too few for the test to prove anything", claims)
	}
	rows, err := ReadRows(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range rows {
		kinds[r.SecretAbsent]++
		switch r.SecretAbsent {
		case AbsentLonger:
			if len(r.Secret) != 5 || len(r.Guesses[0]) != 4 || r.Candidates != 200 {
				t.Errorf("a longer look-alike %q beside candidates like %q (%d of them)", r.Secret, r.Guesses[0], r.Candidates)
			}
		case AbsentNeighbour:
			if len(r.Secret) != 4 || r.Candidates != 199 {
				t.Errorf("a neighbour look-alike %q scored against %d candidates, want 199 (the secret removed)", r.Secret, r.Candidates)
			}
		}
		if r.SecretAbsent != "" && slices.Contains(r.Verdicts, content.VerdictClaim) {
			t.Errorf("%s: look-alike %q claimed as %v", r.Setting.Name, r.Secret, r.Guesses)
		}
		if !strings.Contains(r.Text, r.Secret) || len(r.Verdicts) != 2 {
			t.Errorf("victim row %+v: its text does not hold its secret, or not a verdict per scored block", r)
		}
	}
	// 7 settings: the deployment, 2 x 2 shields, 2 dtypes (cond(A) 1 is the deployment's).
	if kinds[""] != 4*7 || kinds[AbsentLonger] != 3*7 || kinds[AbsentNeighbour] != 3*7 {
		t.Errorf("rows per kind %v, want 28 victims and 21 look-alikes of each kind over 7 settings", kinds)
	}
}

// A template whose fills are not shorter than the batch's tokens per text is refused before
// anything is written (the row after a claimed text must be in U), naming the template.
func TestContentTemplateMustFitTheBatch(t *testing.T) {
	d := contentDeployment(t, 1, 0)
	d.Batch.TokensPerText = 12
	out := filepath.Join(t.TempDir(), "a")
	_, err := Run(context.Background(), d, Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "secrets.templates[0] (pin): \"pin 0") || !strings.Contains(err.Error(), "is 13 tokens") {
		t.Fatalf("a template of 13 tokens in batches of 12: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, DeploymentFile)); err == nil {
		t.Errorf("a refused template left %s", DeploymentFile)
	}
}

// How a victim's decisions at its scored blocks become its row: the secret claimed is a right
// claim; another candidate claimed, or "not among the candidates" for a secret that is one, is
// wrong; for a look-alike every candidate claimed is wrong and a proof of absence is its right
// claim; "ranked first, not claimed" is no claim. The answer is the first block's claim, else the
// deepest block's first-ranked candidate.
func TestContentClaimTally(t *testing.T) {
	claim := func(guess string) content.Victim {
		return content.Victim{Verdict: content.VerdictClaim, Claimed: true, Guess: guess}
	}
	absent := content.Victim{Verdict: content.VerdictAbsent, Guess: "1111"}
	ranked := content.Victim{Verdict: content.VerdictRanked, Guess: "1603"}
	claim2 := func(v content.Victim, guess string) content.Victim { v.Guess = guess; return v }
	for _, tc := range []struct {
		name                       string
		present                    bool
		blocks                     []content.Victim
		answer                     string
		claimed, undecided         bool
		wrong, claims, claimsRight int
	}{
		{"recovered", true, []content.Victim{ranked, claim("1603")}, "1603", true, false, 0, 1, 1},
		{"another candidate", true, []content.Victim{claim("1604"), ranked}, "1604", false, false, 1, 1, 0},
		{"wrong then right", true, []content.Victim{claim("1604"), claim("1603")}, "1604", true, false, 1, 2, 1},
		{"said absent", true, []content.Victim{absent, ranked}, "", false, false, 1, 1, 0},
		{"a guess", true, []content.Victim{claim2(ranked, "1111"), ranked}, "1603", false, true, 0, 0, 0},
		{"look-alike claimed", false, []content.Victim{ranked, claim("1603")}, "1603", false, false, 1, 1, 0},
		{"look-alike proven absent", false, []content.Victim{absent, ranked}, "", true, false, 0, 1, 1},
		{"look-alike not claimed", false, []content.Victim{ranked, ranked}, "1603", false, true, 0, 0, 0},
	} {
		var c claimTally
		for _, v := range tc.blocks {
			c.add(v, tc.present, "1603")
		}
		var r Row
		c.fill(&r, tc.present)
		var guesses []string
		for _, v := range tc.blocks {
			guesses = append(guesses, v.Guess)
		}
		if a := c.answer(guesses); a != tc.answer || r.Claimed != tc.claimed || r.CannotTell != tc.undecided || r.WrongClaims != tc.wrong ||
			r.Stats.Claims != tc.claims || r.Stats.ClaimsRight != tc.claimsRight {
			t.Errorf("%s: answer %q claimed %v undecided %v wrong %d claims %d right %d", tc.name, a, r.Claimed, r.CannotTell,
				r.WrongClaims, r.Stats.Claims, r.Stats.ClaimsRight)
		}
	}
}
