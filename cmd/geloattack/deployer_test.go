package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/hf"
)

// The decode attack on rows a deployer we did not write computed: PyTorch in bf16
// (bench/torch_deploy.py), from the texts `decode -deployer-texts` wrote, attacked with
// `decode -deployer-rows` (the bound of a bf16 deployer, read from its deployer.json). Every claim
// is a true text; the run header names the stack. The same run with the rows claimed bit-equal
// (-recompute-error pinned tiny) is what the bound protects against: it must not claim more.
func TestDecodeAttacksPyTorchBF16Deployer(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_deploy.py")
	ctx := context.Background()
	dir := t.TempDir()
	writeTinyLM(t, dir, "1") // the tokenizer.json and texts of the lm tests
	md := filepath.Join(dir, "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 4, DType: hf.BF16, Out: md}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(md, "tokenizer.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	texts := filepath.Join(dir, "texts.txt")
	common := []string{"-model", md, "-texts", texts, "-max-texts", "40", "-max-tokens", "12", "-split", "train"}
	in := filepath.Join(dir, "deployer-texts.jsonl")
	if err := cmdDecode.run(ctx, "geloattack decode", append(common, "-deployer-texts", in), io.Discard); err != nil {
		t.Fatal(err)
	}
	rows := torchDeployBF16(t, script, md, in, "0,1", dir)
	run := func(extra ...string) []decode.BatchResult {
		t.Helper()
		out := filepath.Join(t.TempDir(), "r")
		args := append(append(append([]string{}, common...), "-deployer-rows", rows, "-batches", "3", "-out", out), extra...)
		if err := cmdDecode.run(ctx, "geloattack decode", args, io.Discard); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, decode.ResultsJSON))
		if err != nil {
			t.Fatal(err)
		}
		var res []decode.BatchResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	claims := func(res []decode.BatchResult) (n, right int, exact float64) {
		for _, r := range res {
			n += r.Claims
			right += r.ClaimsRight
			exact += r.Exact / float64(len(res))
			for _, d := range r.Decoded {
				if d.Claimed && !slices.ContainsFunc(r.Truth, func(u []int) bool { return slices.Equal(u, d.Tokens) }) {
					t.Errorf("batch %d: WRONG claim %v of a bf16 deployer's rows; truth %v", r.Index, d.Tokens, r.Truth)
				}
			}
		}
		return
	}
	n, right, exact := claims(run())
	t.Logf("bf16 deployer, its bound: %d claims, %d right, exact %.2f", n, right, exact)
	if n != right {
		t.Errorf("%d claims, %d right", n, right)
	}
	if exact == 0 {
		t.Errorf("no text read back from the bf16 deployer's rows: the attack is not exercised")
	}
	// The deployer's stack is named, and a model the deployer did not run is refused.
	other := filepath.Join(dir, "other")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 5, DType: hf.F32, Out: other}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "tokenizer.json"), raw, 0o644)
	args := []string{"-model", other, "-texts", texts, "-max-texts", "40", "-max-tokens", "12", "-deployer-rows", rows}
	if err := cmdDecode.run(ctx, "geloattack decode", args, io.Discard); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a model the deployer did not run: %v", err)
	}
}

// torchDeployBF16 runs the PyTorch deployer (script: bench/torch_deploy.py) on the model in md
// over the token input in, in bf16, writing the attn-input rows of blocks (as --blocks takes
// them) into dir/rows, and returns that directory.
func torchDeployBF16(t *testing.T, script, md, in, blocks, dir string) string {
	t.Helper()
	return torchDeploy(t, script, md, in, dir, "--blocks", blocks, "--points", "attn-input")
}

// torchDeploy runs a PyTorch deployer script (bench/torch_deploy.py or torch_bert_deploy.py) on
// the model in md over the token input in, in bf16 on one thread, with the script's own flags,
// writing its rows into dir/rows, and returns that directory.
func torchDeploy(t *testing.T, script, md, in, dir string, flags ...string) string {
	t.Helper()
	rows := filepath.Join(dir, "rows")
	args := append([]string{script, "--model", md, "--tokens", in, "--out", rows, "--dtype", "bf16", "--threads", "1"}, flags...)
	if b, err := exec.Command(torchcheck.Python, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	return rows
}
