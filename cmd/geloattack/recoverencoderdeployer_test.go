package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/internal/torchcheck"
)

// recoverEncoderDeployerVictims is how many victims the PyTorch encoder deployer's test attacks.
const recoverEncoderDeployerVictims = 16

// `recover -deployer-rows` on an encoder store (issue 36 item 6): all-MiniLM-L6-v2's hidden states
// at the small store's layer computed by PyTorch in bf16 (bench/torch_bert_deploy.py) from the token
// ids `recover -deployer-texts` wrote; the candidates are recomputed here. Under the bf16 bound
// deployer.json declares no claim is wrong, no present secret is called "not among the candidates",
// secrets are claimed, and with the secrets absent nothing is claimed. The same rows under the fp32
// bound (the wrong one) call present secrets "not among": what the bf16 bound protects against.
// Rows of other victims (another -seed) are refused.
func TestRecoverAttacksPyTorchBF16EncoderDeployer(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_bert_deploy.py")
	st, model := contentStore(t)
	dir := t.TempDir()
	base := []string{"-store", st, "-model", model, "-candidates", "100", "-victims", strconv.Itoa(recoverEncoderDeployerVictims),
		"-positives", "4", "-tokens-per-text", "64", "-shield-scale", "1"}
	in := filepath.Join(dir, "victims.jsonl")
	if b, err := cli(t, append(append([]string{"recover", "-quiet"}, base...), "-deployer-texts", in)...).CombinedOutput(); err != nil {
		t.Fatalf("recover -deployer-texts: %v\n%s", err, b)
	}
	texts, err := deployer.ReadTexts(mustRead(t, in))
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != recoverEncoderDeployerVictims {
		t.Fatalf("%d victims' texts written, want %d", len(texts), recoverEncoderDeployerVictims)
	}
	for v, x := range texts {
		// WordPiece's [CLS] = 101 opens every text and [SEP] = 102 closes it: the deployer computes
		// them as the store's pass does.
		if x.ID != int64(v) || x.BOS != 1 || len(x.Tokens) < 5 || x.Tokens[0] != 101 || x.Tokens[len(x.Tokens)-1] != 102 {
			t.Errorf("deployer input line %d: %+v; want victim %d framed by [CLS] (counted as bos 1) and [SEP]", v, x, v)
		}
	}
	rows := filepath.Join(dir, "rows")
	cmd := exec.Command(torchcheck.Python, script, "--model", model, "--tokens", in, "--out", rows, "--dtype", "bf16",
		"--blocks", "3", "--threads", "1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	attack := append(append([]string{}, base...), "-deployer-rows", rows)

	r := recoverJSON(t, attack...)
	claims, wrong, notAmong := verdicts(r)
	t.Logf("bf16 encoder deployer, bf16 bound (rho %.3g): %d of %d claimed, %d wrong, %d present secrets 'not among'", r.Recompute.Rho, claims, len(r.Victims), wrong, notAmong)
	if !strings.Contains(r.Deployer, "PyTorch") || !strings.Contains(r.Deployer, "bf16") || r.Recompute.Precision != "bf16" {
		t.Errorf("deployer %q, recompute %+v: want the PyTorch bf16 stack named and the bf16 bound by default", r.Deployer, r.Recompute)
	}
	if g := r.DeployerGap; g == nil || !(g.Max <= r.Recompute.Rho) || !(g.Max > 0) {
		t.Errorf("the deployer's rows against this repository's: gap %+v, want nonzero and within rho %.3g", g, r.Recompute.Rho)
	} else {
		t.Logf("the bf16 deployer's victim rows lie %.3g (median %.3g) from this repository's", g.Max, g.Median)
	}
	if wrong != 0 || notAmong != 0 {
		logRecoverVictims(t, r)
		t.Errorf("bf16 encoder deployer under the bf16 bound: %d wrong claims, %d present secrets 'not among'; want 0 and 0", wrong, notAmong)
	}
	if 2*claims < len(r.Victims) {
		logRecoverVictims(t, r)
		t.Errorf("%d of %d secrets claimed from the bf16 deployer's rows: want at least half (99 of 100 at 10^4 candidates, docs/content-recovery.md)", claims, len(r.Victims))
	}
	if a := recoverJSON(t, append(attack, "-absent")...); a.Claimed != 0 {
		logRecoverVictims(t, a)
		t.Errorf("bf16 encoder deployer, secrets absent: claimed %.2f", a.Claimed)
	}
	// The wrong bound: bf16 rows taken for an fp32 deployer's.
	f := recoverJSON(t, append(attack, "-deployer-precision", "fp32")...)
	_, fWrong, fNotAmong := verdicts(f)
	if g := f.DeployerGap; g == nil || !(g.Max > f.Recompute.Rho) {
		t.Errorf("bf16 rows under the fp32 bound: gap %+v, want beyond rho %.3g", g, f.Recompute.Rho)
	}
	if fNotAmong == 0 {
		t.Errorf("the bf16 rows under the fp32 bound called no present secret 'not among' (%d wrong claims): the bound is not shown to matter", fWrong)
	}
	// Rows of other victims are refused by name.
	if out, err := cli(t, append(append([]string{"recover", "-quiet"}, attack...), "-seed", "99")...).CombinedOutput(); err == nil || !strings.Contains(string(out), "-deployer-texts") {
		t.Errorf("rows of other victims: %v\n%s", err, out)
	}
}
