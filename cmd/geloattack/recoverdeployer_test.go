package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/hf"
)

// recoverDeployerVictims is how many victims the PyTorch deployer's test attacks.
const recoverDeployerVictims = 16

// verdicts counts a result's claims, wrong claims (a guess that is not the secret, or any claim of
// an absent secret) and "not among the candidates" said of a present secret.
func verdicts(r *content.Result) (claims, wrong, notAmongPresent int) {
	for _, v := range r.Victims {
		if v.Claimed {
			claims++
			if v.SecretAbsent || v.Guess != v.Value {
				wrong++
			}
		}
		if v.Verdict == content.VerdictAbsent && !v.SecretAbsent {
			notAmongPresent++
		}
	}
	return claims, wrong, notAmongPresent
}

// `recover -deployer-rows` on rows a deployer we did not write computed (issue 36 item 1):
// PyTorch in bf16 (bench/torch_deploy.py) runs the victims' texts `recover -deployer-texts` wrote,
// and recover attacks its rows with the bound of the dtype deployer.json declares. No claim is
// wrong, no present secret is called "not among the candidates", the secrets are claimed, and
// with the secrets absent nothing is claimed; the run names the stack. The same rows attacked
// with the fp32 bound (-deployer-precision fp32, the wrong bound) call present secrets "not
// among": what the bf16 bound protects against. Rows of another model, and rows of other victims
// (another template's), are refused. The input holds each distinct victim text once (16 victims
// draw among 8 candidates).
func TestRecoverAttacksPyTorchBF16Deployer(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_deploy.py")
	md, st, set := decoderRecoverFixture(t, hf.BF16)
	dir := t.TempDir()
	base := []string{"-store", st, "-model", md, "-template", "my PIN is {x}", "-suffix", " ok", "-set", "file:" + set,
		"-victims", strconv.Itoa(recoverDeployerVictims), "-positives", "2", "-tokens-per-text", "48"}
	in := filepath.Join(dir, "victims.jsonl")
	texts := recoverDeployerTexts(t, in, base...)
	checkDistinctVictimTexts(t, texts, recoverDeployerVictims)
	for _, x := range texts {
		if x.BOS != 1 || len(x.Tokens) < 5 || x.Tokens[0] != 1 {
			t.Errorf("deployer input text %d: %+v; want BOS <s> (1) counted", x.ID, x)
		}
	}
	rows := torchDeployBF16(t, script, md, in, "1", dir)
	attack := append(append([]string{}, base...), "-deployer-rows", rows)

	checkBF16DeployerRecover(t, "bf16 deployer", attack, 1)

	// The header and the table name the stack.
	out, err := cli(t, append([]string{"recover"}, attack...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "recover: the victims' rows: PyTorch") ||
		!strings.Contains(string(out), "victims' rows computed by the deployer's stack: PyTorch") ||
		!strings.Contains(string(out), "from this repository's rows of the same texts at most") {
		t.Errorf("the run does not name the deployer's stack: %v\n%s", err, out)
	}
	// Rows of another model are refused by name (rows of other victims: checkBF16DeployerRecover).
	// Another model of the store's name whose config.json differs (float32 weights): refused
	// before its weights are read. (Only config.json is hashed: weights of another seed under the
	// same config pass this check, and Verify's recomputation of store texts catches them.)
	other := filepath.Join(t.TempDir(), "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 128, Vocab: 300, Seed: 4, DType: hf.F32, Out: other,
		Tokenizer: filepath.Join(md, "tokenizer.json")}); err != nil {
		t.Fatal(err)
	}
	swapped := append(append([]string{}, attack...), "-model", other)
	if out, err := cli(t, append([]string{"recover", "-quiet"}, swapped...)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "config.json") {
		t.Errorf("rows of another model: %v\n%s", err, out)
	}
}

// checkBF16DeployerRecover attacks a PyTorch bf16 deployer's rows (attack: recover's flags with
// -deployer-rows; what names the deployer in messages) and checks what every deployer test asks.
// Under the bf16 bound deployer.json declares: the stack is named, the rows lie within rho of this
// repository's and not on them, no claim is wrong, no present secret is called "not among the
// candidates", at least minClaims secrets are claimed, and with the secrets absent nothing is. Under
// the fp32 bound (-deployer-precision fp32, the wrong one), a smaller rho the rows lie beyond, and
// present secrets called "not among": what the bf16 bound protects against. Rows of other victims
// (another template's: -suffix " then") are refused before any victim runs, naming the victim and
// -deployer-texts.
func checkBF16DeployerRecover(t *testing.T, what string, attack []string, minClaims int) {
	t.Helper()
	r := recoverJSON(t, attack...)
	claims, wrong, notAmong := verdicts(r)
	t.Logf("%s, bf16 bound (rho %.3g): %d of %d claimed, %d wrong, %d present secrets 'not among'", what, r.Recompute.Rho, claims, len(r.Victims), wrong, notAmong)
	if !strings.Contains(r.Deployer, "PyTorch") || !strings.Contains(r.Deployer, "bf16") || r.Recompute.Precision != "bf16" {
		t.Errorf("deployer %q, recompute %+v: want the PyTorch bf16 stack named and the bf16 bound by default", r.Deployer, r.Recompute)
	}
	if g := r.DeployerGap; g == nil || !(g.Max <= r.Recompute.Rho) || !(g.Max > 0) {
		t.Errorf("the %s's rows against this repository's: gap %+v, want nonzero and within rho %.3g", what, g, r.Recompute.Rho)
	} else {
		t.Logf("the %s's victim rows lie %.3g (median %.3g) from this repository's", what, g.Max, g.Median)
	}
	if wrong != 0 || notAmong != 0 {
		logRecoverVictims(t, r)
		t.Errorf("%s under the bf16 bound: %d wrong claims, %d present secrets 'not among'; want 0 and 0", what, wrong, notAmong)
	}
	if claims < minClaims {
		logRecoverVictims(t, r)
		t.Errorf("%d of %d secrets claimed from the %s's rows: want at least %d (the attack must be exercised)", claims, len(r.Victims), what, minClaims)
	}
	if a := recoverJSON(t, append(attack, "-absent")...); a.Claimed != 0 {
		logRecoverVictims(t, a)
		t.Errorf("%s, secrets absent: claimed %.2f", what, a.Claimed)
	}
	// The wrong bound: bf16 rows (about 2^-8 off per rounding) taken for an fp32 deployer's.
	f := recoverJSON(t, append(attack, "-deployer-precision", "fp32")...)
	fClaims, fWrong, fNotAmong := verdicts(f)
	t.Logf("%s, fp32 bound (rho %.3g): %d claimed, %d wrong, %d present secrets 'not among'", what, f.Recompute.Rho, fClaims, fWrong, fNotAmong)
	if f.Recompute.Precision != "fp32" || !(f.Recompute.Rho < r.Recompute.Rho) {
		t.Errorf("-deployer-precision fp32: recompute %+v, want fp32's bound below bf16's %.3g", f.Recompute, r.Recompute.Rho)
	}
	if g := f.DeployerGap; g == nil || !(g.Max > f.Recompute.Rho) {
		t.Errorf("bf16 rows under the fp32 bound: gap %+v, want beyond rho %.3g", g, f.Recompute.Rho)
	}
	if fNotAmong == 0 {
		t.Errorf("the bf16 rows under the fp32 bound called no present secret 'not among': the bound is not shown to matter")
	}
	out, err := cli(t, append(append([]string{"recover"}, attack...), "-suffix", " then")...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "victim 0 (\"my PIN is ") || !strings.Contains(string(out), "-deployer-texts") ||
		strings.Contains(string(out), "recover: embedding") {
		t.Errorf("rows of other victims: %v; want a refusal naming the victim and -deployer-texts before the candidates are embedded\n%s", err, out)
	}
}

// logRecoverVictims logs each victim's verdict, for a failing test.
func logRecoverVictims(t *testing.T, r *content.Result) {
	t.Helper()
	for _, v := range r.Victims {
		t.Logf("victim %d: secret %s (absent %v), guess %s, verdict %s, rank %d of n_obs %d, bound %.3g",
			v.Example, v.Value, v.SecretAbsent, v.Guess, v.Verdict, v.Rank, v.NObs, v.ResidualBound)
	}
}

// checkDistinctVictimTexts checks a deployer input recover -deployer-texts wrote for victims
// victims: ids 0, 1, ..., each token sequence once, at most one text per victim.
func checkDistinctVictimTexts(t *testing.T, texts []deployer.Text, victims int) {
	t.Helper()
	seen := map[string]bool{}
	for i, x := range texts {
		key := fmt.Sprint(x.Tokens)
		if x.ID != int64(i) || seen[key] {
			t.Errorf("deployer input line %d: id %d, tokens %v (seen before: %v); want id %d and each text once", i, x.ID, x.Tokens, seen[key], i)
		}
		seen[key] = true
	}
	if len(texts) == 0 || len(texts) > victims {
		t.Errorf("%d texts written for %d victims: want 1 to %d", len(texts), victims, victims)
	}
}

// recoverDeployerTexts runs `recover -quiet args... -deployer-texts path` and returns the
// deployer input it wrote.
func recoverDeployerTexts(t *testing.T, path string, args ...string) []deployer.Text {
	t.Helper()
	if b, err := cli(t, append(append([]string{"recover", "-quiet"}, args...), "-deployer-texts", path)...).CombinedOutput(); err != nil {
		t.Fatalf("recover %s -deployer-texts: %v\n%s", strings.Join(args, " "), err, b)
	}
	texts, err := deployer.ReadTexts(mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return texts
}
