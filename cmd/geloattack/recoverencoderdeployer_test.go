package main

import (
	"path/filepath"
	"strconv"
	"testing"

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
// Rows of other victims (another template's) are refused.
func TestRecoverAttacksPyTorchBF16EncoderDeployer(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_bert_deploy.py")
	st, model := contentStore(t)
	dir := t.TempDir()
	base := []string{"-store", st, "-model", model, "-candidates", "100", "-victims", strconv.Itoa(recoverEncoderDeployerVictims),
		"-positives", "4", "-tokens-per-text", "64", "-shield-scale", "1"}
	in := filepath.Join(dir, "victims.jsonl")
	texts := recoverDeployerTexts(t, in, base...)
	checkDistinctVictimTexts(t, texts, recoverEncoderDeployerVictims)
	for _, x := range texts {
		// WordPiece's [CLS] = 101 opens every text and [SEP] = 102 closes it: the deployer computes
		// them as the store's pass does.
		if x.BOS != 1 || len(x.Tokens) < 5 || x.Tokens[0] != 101 || x.Tokens[len(x.Tokens)-1] != 102 {
			t.Errorf("deployer input text %d: %+v; want it framed by [CLS] (counted as bos 1) and [SEP]", x.ID, x)
		}
	}
	rows := torchDeploy(t, script, model, in, dir, "--blocks", "3")
	attack := append(append([]string{}, base...), "-deployer-rows", rows)
	// At least half the secrets claimed: 99 of 100 at 10^4 candidates (docs/content-recovery.md).
	checkBF16DeployerRecover(t, "bf16 encoder deployer", attack, (recoverEncoderDeployerVictims+1)/2)
}
