package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data/extract"
)

// contentStore returns the small real store and the model directory, skipping when either is
// absent unless GELOATTACK_REQUIRE_REAL_STORE=1 (as TestRealStoreEndToEnd does).
func contentStore(t *testing.T) (storeDir, modelDir string) {
	t.Helper()
	storeDir = os.Getenv("GELOATTACK_SMALL_STORE")
	if storeDir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			storeDir = filepath.Join(home, ".cache", "geloattack", "stores", "small-minilm-l3")
		}
	}
	modelDir, _ = extract.DefaultModelDir()
	for _, p := range []string{filepath.Join(storeDir, "meta.json"), filepath.Join(modelDir, "config.json")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") == "1" {
				t.Fatalf("%s is missing: %v", p, err)
			}
			t.Skipf("no %s (build it with scripts/build-small-store.sh)", p)
		}
	}
	return storeDir, modelDir
}

// recoverJSON runs `geloattack recover` with args and decodes its -out result.
func recoverJSON(t *testing.T, args ...string) *content.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	b, err := cli(t, append([]string{"recover", "-quiet", "-out", out}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("recover %v: %v\n%s", args, err, b)
	}
	var r content.Result
	if err := json.Unmarshal(mustRead(t, out), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestContentRecoversAPINAmong100 is the CI test of issue 19 on real hidden states: with every row
// observed in float32 and n < d, the secret PIN of every victim is ranked first among 100
// candidates, and the attack claims it.
func TestContentRecoversAPINAmong100(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-candidates", "100", "-victims", "4",
		"-positives", "4", "-tokens-per-text", "64", "-shield-scale", "1")
	s := r.Summaries[0]
	if s.Score != "slot_worst" || s.Recovery != 1 || r.Claimed != 1 || r.ClaimedCorrect != 1 {
		t.Fatalf("recovery %v (score %s), claimed %v (right %v); want 1, 1, 1", s.Recovery, s.Score, r.Claimed, r.ClaimedCorrect)
	}
	if r.RankMax >= r.D || s.Margin[0] < 3 {
		t.Fatalf("rank max %d of d %d, smallest margin %.2f decades: want rank < d and a margin of >= 3 decades", r.RankMax, r.D, s.Margin[0])
	}
}

// TestContentFullRankIsNotADefence: 420 gaussian shield rows give U full numerical rank d, so
// rowspace(U) is all of R^d and the residual ranks at chance; but with every row observed a row
// of X has leverage <= 1 while the wrong candidates' secret rows do not, so the leverage ranks the
// secret first, and every claim the attack makes is right (issue 28).
func TestContentFullRankIsNotADefence(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-candidates", "100", "-victims", "4",
		"-positives", "4", "-tokens-per-text", "64", "-shield-rows", "420")
	if r.FullRank != 1 || r.RankMin != r.D {
		t.Fatalf("full rank %v, rank min %d of d %d: the defence cell did not reach full rank", r.FullRank, r.RankMin, r.D)
	}
	byName := map[string]content.Summary{}
	for _, s := range r.Summaries {
		byName[s.Score] = s
	}
	if s := byName["slot_worst"]; s.Recovery > 0.25 {
		t.Errorf("residual recovery %v with U of full rank (chance %v): it should be void", s.Recovery, s.Chance)
	}
	if s := byName["leverage"]; s.Recovery != 1 {
		t.Errorf("leverage recovery %v past full rank with weak shields, want 1", s.Recovery)
	}
	if r.Claimed == 0 || r.ClaimedCorrect != 1 {
		t.Errorf("claimed %v, right %v: want claims, all right", r.Claimed, r.ClaimedCorrect)
	}
	for _, v := range r.Victims {
		if v.Claimed && v.Measure != "leverage" {
			t.Errorf("victim %d claimed by %s at full rank", v.Example, v.Measure)
		}
	}
}

// TestContentSecretAbsentIsNeverClaimed removes each victim's secret from the candidates: below
// full rank the attack must answer "not among the candidates" (no candidate is contained), past
// full rank with weak shields likewise or make no claim; never a claim.
func TestContentSecretAbsentIsNeverClaimed(t *testing.T) {
	st, model := contentStore(t)
	for _, extra := range [][]string{nil, {"-shield-rows", "420"}} {
		args := append([]string{"-store", st, "-model", model, "-candidates", "100", "-victims", "4",
			"-positives", "4", "-tokens-per-text", "64", "-absent"}, extra...)
		r := recoverJSON(t, args...)
		if r.Claimed != 0 {
			t.Errorf("%v: claimed %v with the secret absent", extra, r.Claimed)
		}
		if extra == nil && r.Absent != 1 {
			t.Errorf("below full rank: 'not among the candidates' for %v of the victims, want all", r.Absent)
		}
	}
}

// TestContentRefusesAStoreOfAnotherLayer changes a copy of the store's meta.json to claim layer
// 2: the re-computed rows no longer match the stored ones and the attack refuses.
func TestContentRefusesAStoreOfAnotherLayer(t *testing.T) {
	st, model := contentStore(t)
	dir := t.TempDir()
	for _, f := range []string{"tokens.arrow", "texts.arrow", "meta.json"} {
		b := mustRead(t, filepath.Join(st, f))
		if f == "meta.json" {
			b = []byte(strings.Replace(string(b), `"layer": 3,`, `"layer": 2,`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cli(t, "recover", "-quiet", "-store", dir, "-model", model, "-candidates", "10", "-victims", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "differs from the re-computed row") {
		t.Fatalf("a store relabelled as layer 2 was accepted: %v\n%s", err, out)
	}
}

// TestContentBaselineAttackSelectsRecover checks that `baseline -attack content` is the recover
// command (its flags, its errors) and that bad flags are named.
func TestContentBaselineAttackSelectsRecover(t *testing.T) {
	for _, args := range [][]string{
		{"baseline", "-attack", "content", "-victims", "0"},
		{"baseline", "-attack=content", "-victims", "0"},
	} {
		out, err := cli(t, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `"0" for flag -victims`) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	out, err := cli(t, "recover", "-template", "no slot here", "-store", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "{x}") {
		t.Fatalf("template without a slot: %v\n%s", err, out)
	}
	out, _ = cli(t, "recover", "-h").CombinedOutput()
	for _, w := range []string{"-claim-gap", "-grid", "-set", "slot_worst", "rowspace(U_obs)"} {
		if !strings.Contains(string(out), w) {
			t.Fatalf("recover -h lacks %q:\n%s", w, out)
		}
	}
}
