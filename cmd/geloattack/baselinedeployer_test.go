package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/hf"
)

// rowspaceJSON runs `baseline -attack rowspace` with args and returns its JSON result.
func rowspaceJSON(t *testing.T, args ...string) *rowspaceResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	b, err := cli(t, append([]string{"baseline", "-attack", "rowspace", "-out", out}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("baseline -attack rowspace %v: %v\n%s", args, err, b)
	}
	var r rowspaceResult
	if err := json.Unmarshal(mustRead(t, out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Absence == nil {
		t.Fatalf("baseline -attack rowspace %v: no presence claims in the result", args)
	}
	return &r
}

// The presence attack on a decoder store's own rows (no deployer): the examples and the
// candidates read the same stored rows, so rho is 0, and no positive is proven absent while decoys
// are. The deployer flags are refused where they cannot apply.
func TestBaselineRowspaceProvesDecoysAbsentOnADecoderStore(t *testing.T) {
	md, st, _ := decoderRecoverFixture(t, hf.F32)
	base := []string{"-store", st, "-positives", "2", "-tokens-per-text", "48", "-examples", "8", "-batch", "4"}
	r := rowspaceJSON(t, base...)
	a := r.Absence
	t.Logf("own rows: %+v, rho %g", *a, r.Recompute.Rho)
	if r.Recompute.Rho != 0 || r.Deployer != "" || a.PositivesProven != 0 || a.DecoysProven == 0 || a.Positives != 16 {
		t.Errorf("own rows: %+v, rho %g, deployer %q: want rho 0, 16 positives none proven absent, some decoys proven absent", *a, r.Recompute.Rho, r.Deployer)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(append([]string{}, base...), "-deployer-precision", "bf16"), "-deployer-precision applies with -deployer-rows"},
		{append(append([]string{}, base...), "-deployer-rows", t.TempDir()), "need -model"},
		{[]string{"-examples", "2", "-model", md, "-deployer-texts", filepath.Join(t.TempDir(), "x.jsonl")}, "decoder store"},
		{append(append([]string{}, base...), "-model", md, "-deployer-texts", "a", "-deployer-rows", "b"), "give one"},
	} {
		out, err := cli(t, append([]string{"baseline", "-attack", "rowspace"}, c.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("baseline %v: %v, want a refusal naming %q\n%s", c.args, err, c.want, out)
		}
	}
	if out, err := cli(t, "baseline", "-attack", "fastica", "-model", md).CombinedOutput(); err == nil || !strings.Contains(string(out), "-model applies to -attack rowspace") {
		t.Errorf("-model with fastica: %v\n%s", err, out)
	}
}

// `baseline -attack rowspace -deployer-rows` on rows a deployer we did not write computed (issue 36
// item 1): PyTorch in bf16 (bench/torch_deploy.py) runs the texts `-deployer-texts` wrote, GELO
// mixes its rows, the candidates are the store's. Under the bf16 bound the deployer.json declares
// no positive is proven absent (no wrong claim), below full rank and past it, and decoys are; the
// run names the stack. Under the fp32 bound (the wrong one) the same rows make positives "proven"
// absent: what the bound protects against. Examples that take rows of texts the deployer did not
// compute, and rows of another model, are refused.
func TestBaselineRowspaceAttacksPyTorchBF16Deployer(t *testing.T) {
	d := rowspaceBF16Deployer(t)
	md, base, in := d.model, d.base, d.texts
	lines := 0
	ids := map[int64]bool{}
	texts, err := deployer.ReadTexts(mustRead(t, in))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range texts {
		if ids[x.ID] || x.BOS != 1 || len(x.Tokens) < 2 || x.Tokens[0] != 1 {
			t.Errorf("deployer input line %d: %+v; want a new store text id, BOS <s> (1) counted", lines, x)
		}
		ids[x.ID] = true
		lines++
	}
	if lines < 8 || lines > 16 {
		t.Fatalf("%d texts written for 8 examples of 2 positives: want 8..16", lines)
	}
	attack := append(append([]string{}, base...), "-deployer-rows", d.rows)

	r := rowspaceJSON(t, attack...)
	a := r.Absence
	t.Logf("bf16 deployer, bf16 bound (rho %.3g): %+v; top1 %v", r.Recompute.Rho, *a, r.Top1)
	if !strings.Contains(r.Deployer, "PyTorch") || !strings.Contains(r.Deployer, "bf16") || r.Recompute.Precision != "bf16" {
		t.Errorf("deployer %q, recompute %+v: want the PyTorch bf16 stack named and the bf16 bound by default", r.Deployer, r.Recompute)
	}
	if a.PositivesProven != 0 || a.Positives != 16 {
		t.Errorf("bf16 deployer under the bf16 bound: %+v; want 16 positives, none proven absent", *a)
	}
	if a.DecoysProven == 0 {
		t.Errorf("no decoy proven absent from the bf16 deployer's rows: the claims are not exercised")
	}
	if r.Top1.Mean < 0.9 || r.SourceResidual < 1e-9 {
		t.Errorf("top1 %v, source residual %.3g: want the positives ranked first, their residual lifted by bf16", r.Top1, r.SourceResidual)
	}
	// Past full rank (+128 shield rows, d 128) the leverage bound decides.
	full := rowspaceJSON(t, append(attack, "-shield-rows", "128")...)
	t.Logf("past full rank: %+v", *full.Absence)
	if full.Absence.PositivesProven != 0 {
		t.Errorf("bf16 deployer past full rank: %+v; want no positive proven absent", *full.Absence)
	}
	// The wrong bound: bf16 rows (about 2^-8 off per rounding) taken for an fp32 deployer's.
	f := rowspaceJSON(t, append(attack, "-deployer-precision", "fp32")...)
	t.Logf("bf16 deployer, fp32 bound (rho %.3g): %+v", f.Recompute.Rho, *f.Absence)
	if f.Recompute.Precision != "fp32" || !(f.Recompute.Rho < r.Recompute.Rho) || f.Absence.PositivesProven == 0 {
		t.Errorf("bf16 rows under the fp32 bound: recompute %+v, %+v; want fp32's narrower bound to prove positives absent (wrongly), showing the bound matters",
			f.Recompute, *f.Absence)
	}

	// The run names the stack.
	out, err := cli(t, append([]string{"baseline", "-attack", "rowspace"}, attack...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "baseline: the examples' rows: PyTorch") ||
		!strings.Contains(string(out), "mixed rows computed by the deployer's stack: PyTorch") ||
		!strings.Contains(string(out), "positives proven absent (wrong claims)") {
		t.Errorf("the run does not name the deployer's stack or its claims: %v\n%s", err, out)
	}
	// Examples whose texts the deployer did not compute, and rows of another model, are refused.
	more := append(append([]string{}, attack...), "-examples", "40")
	if out, err := cli(t, append([]string{"baseline", "-attack", "rowspace"}, more...)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "-deployer-texts") {
		t.Errorf("examples beyond the deployer's texts: %v\n%s", err, out)
	}
	other := filepath.Join(t.TempDir(), "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 128, Vocab: 300, Seed: 4, DType: hf.F32, Out: other,
		Tokenizer: filepath.Join(md, "tokenizer.json")}); err != nil {
		t.Fatal(err)
	}
	swapped := append(append([]string{}, attack...), "-model", other)
	if out, err := cli(t, append([]string{"baseline", "-attack", "rowspace"}, swapped...)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "config.json") {
		t.Errorf("rows of another model: %v\n%s", err, out)
	}
}

// bf16DeployerRows is a bf16 decoder fixture (decoderRecoverFixture) with the texts `baseline
// -attack rowspace -deployer-texts` wrote for base's examples and the PyTorch bf16 deployer's rows
// of them (bench/torch_deploy.py, block 1's attention input).
type bf16DeployerRows struct {
	model, store string
	base         []string // baseline's flags: store, model, examples
	texts, rows  string   // the deployer's input and its rows folder
}

// rowspaceBF16Deployer builds a bf16DeployerRows: 8 examples of 2 positives of 48 tokens.
func rowspaceBF16Deployer(t *testing.T) bf16DeployerRows {
	t.Helper()
	script := torchcheck.Script(t, "../../bench/torch_deploy.py")
	md, st, _ := decoderRecoverFixture(t, hf.BF16)
	dir := t.TempDir()
	base := []string{"-store", st, "-model", md, "-positives", "2", "-tokens-per-text", "48", "-examples", "8", "-batch", "4"}
	in := filepath.Join(dir, "texts.jsonl")
	if b, err := cli(t, append(append([]string{"baseline", "-attack", "rowspace"}, base...), "-deployer-texts", in)...).CombinedOutput(); err != nil {
		t.Fatalf("baseline -deployer-texts: %v\n%s", err, b)
	}
	return bf16DeployerRows{model: md, store: st, base: base, texts: in, rows: torchDeployBF16(t, script, md, in, "1", dir)}
}
