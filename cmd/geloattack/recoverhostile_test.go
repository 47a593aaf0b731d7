package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/models/hf"
)

// `recover -deployer-rows` against rows deployer.json declares bf16: left out, -deployer-precision
// is bf16 and the header says so; -deployer-precision fp32 (finer than the rows) still runs, as an
// experiment with the wrong bound may, but the header (the cell's table, the grid's -table) and
// stderr say the bound is the fp32 deployer's, which bf16 rows need not meet; -recompute-error
// sets rho itself and no warning is due. A deployer row made NaN is refused before any
// candidate is embedded, naming the directory, the text, the row and the element.
func TestRecoverHostileDeployerBound(t *testing.T) {
	md, st, set := decoderRecoverFixture(t, hf.F32)
	dir := t.TempDir()
	base := []string{"-store", st, "-model", md, "-template", "my PIN is {x}", "-suffix", " ok", "-set", "file:" + set,
		"-victims", "2", "-positives", "2", "-tokens-per-text", "48"}
	in := filepath.Join(dir, "victims.jsonl")
	texts := recoverDeployerTexts(t, in, base...)
	rows := writeOwnDeployerRows(t, md, texts, deployer.AttnInput, 1, filepath.Join(dir, "rows"))
	info := filepath.Join(rows, deployer.InfoFile)
	if err := os.WriteFile(info, []byte(strings.Replace(string(mustRead(t, info)), `"dtype":"fp32"`, `"dtype":"bf16"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	attack := append([]string{"recover"}, append(slices.Clone(base), "-deployer-rows", rows)...)
	const warning = "WARNING: -deployer-precision fp32 is finer than the deployer's dtype bf16 (deployer.json)"
	for _, c := range []struct {
		name   string
		args   []string
		warn   bool
		source string
	}{
		{"dtype's bound", nil, false, "deployer bf16 through 1 blocks"},
		{"finer bound", []string{"-deployer-precision", "fp32"}, true, "deployer fp32 through 1 blocks"},
		{"coarser bound", []string{"-deployer-precision", "bf16"}, false, "deployer bf16 through 1 blocks"},
		{"own rho", []string{"-deployer-precision", "fp32", "-recompute-error", "0.01"}, false, "given with -recompute-error"},
	} {
		cmd := cli(t, append(append(slices.Clone(attack), "-quiet"), c.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", c.name, err, out, stderr.String())
		}
		header, _, _ := strings.Cut(string(out), "\n|")
		if strings.Contains(header, warning) != c.warn || strings.Contains(stderr.String(), warning) != c.warn || !strings.Contains(header, c.source) {
			t.Errorf("%s: header %q, stderr %q; want the warning %v and the bound's source %q", c.name, header, stderr.String(), c.warn, c.source)
		}
	}
	table := filepath.Join(dir, "grid.md")
	grid := append(slices.Clone(attack), "-quiet", "-grid", "-axes", "dtype", "-deployer-precision", "fp32", "-table", table)
	if b, err := cli(t, grid...).CombinedOutput(); err != nil {
		t.Fatalf("grid: %v\n%s", err, b)
	}
	if head, _, _ := strings.Cut(string(mustRead(t, table)), "\n|"); !strings.Contains(head, warning) {
		t.Errorf("the grid's -table header %q does not carry the warning", head)
	}

	// A NaN in the last text's rows.
	sub := filepath.Join(rows, "attn-input.1")
	last := texts[len(texts)-1]
	name := filepath.Join(sub, fmt.Sprintf("text_%08d.npz", last.ID))
	if _, err := os.Stat(name); err != nil {
		t.Fatal(err)
	}
	rowsNaN := make([]float32, len(last.Tokens)*128)
	rowsNaN[128+3] = float32(math.NaN())
	writeTestNPZ(t, name, map[string]testNPY{
		"token_ids":      {"<i4", []int{len(last.Tokens)}, le(last.Tokens)},
		"attention_mask": {"|u1", []int{len(last.Tokens)}, []byte(strings.Repeat("\x01", len(last.Tokens)))},
		"embeddings":     {"<f4", []int{len(last.Tokens), 128}, le(rowsNaN)},
	})
	out, err := cli(t, attack...).CombinedOutput()
	for _, w := range []string{"-deployer-rows", sub, fmt.Sprintf("text %d", last.ID), "embeddings row 1", "element 3", "NaN"} {
		if err == nil || !strings.Contains(string(out), w) {
			t.Errorf("a NaN row: %v; want a refusal saying %q\n%s", err, w, out)
		}
	}
	if strings.Contains(string(out), "recover: embedding") {
		t.Errorf("a NaN row refused only after the candidates were embedded:\n%s", out)
	}
}

// A deployer run whose deployer.json declares (and whose rows have) another width than the
// store's rows is refused before the model is loaded or any candidate embedded, naming
// hidden_size and both widths; before, the first cell stopped at its victims' rows.
func TestRecoverHostileDeployerWidth(t *testing.T) {
	md, st, set := decoderRecoverFixture(t, hf.F32)
	dir := t.TempDir()
	base := []string{"recover", "-store", st, "-model", md, "-template", "my PIN is {x}", "-suffix", " ok", "-set", "file:" + set,
		"-victims", "2", "-positives", "2", "-tokens-per-text", "48"}
	in := filepath.Join(dir, "victims.jsonl")
	if b, err := cli(t, append(slices.Clone(base), "-quiet", "-deployer-texts", in)...).CombinedOutput(); err != nil {
		t.Fatalf("recover -deployer-texts: %v\n%s", err, b)
	}
	texts, err := deployer.ReadTexts(mustRead(t, in))
	if err != nil {
		t.Fatal(err)
	}
	rows := writeOwnDeployerRows(t, md, texts, deployer.AttnInput, 1, filepath.Join(dir, "rows"))
	const d = 64 // the fixture's rows are 128 wide
	for _, x := range texts {
		n := len(x.Tokens)
		writeTestNPZ(t, filepath.Join(rows, "attn-input.1", fmt.Sprintf("text_%08d.npz", x.ID)), map[string]testNPY{
			"token_ids":      {"<i4", []int{n}, le(x.Tokens)},
			"attention_mask": {"|u1", []int{n}, []byte(strings.Repeat("\x01", n))},
			"embeddings":     {"<f4", []int{n, d}, le(make([]float32, n*d))},
		})
	}
	info := filepath.Join(rows, deployer.InfoFile)
	if err := os.WriteFile(info, []byte(strings.Replace(string(mustRead(t, info)), `"hidden_size":128`, `"hidden_size":64`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, append(slices.Clone(base), "-deployer-rows", rows)...).CombinedOutput()
	for _, w := range []string{"-deployer-rows " + rows, "deployer.json hidden_size 64", "128 wide"} {
		if err == nil || !strings.Contains(string(out), w) {
			t.Errorf("rows 64 wide against a 128-wide store: %v; want a refusal saying %q\n%s", err, w, out)
		}
	}
	if strings.Contains(string(out), "recover: embedding") || strings.Contains(string(out), "reproduces") {
		t.Errorf("refused only after the store check or the candidates:\n%s", out)
	}
}

// An output inside a directory the run reads is refused before any work and the input is left
// as it was: -deployer-texts onto the store's meta.json (through a symbolic link to the store
// too), -out onto the deployer's deployer.json, -table into the model directory. An output beside
// them (in their parent) is written.
func TestRecoverHostileOutputsInsideInputs(t *testing.T) {
	md, st, set := decoderRecoverFixture(t, hf.F32)
	dir := t.TempDir()
	base := []string{"recover", "-quiet", "-store", st, "-model", md, "-template", "my PIN is {x}", "-suffix", " ok", "-set", "file:" + set,
		"-victims", "2", "-positives", "2", "-tokens-per-text", "48"}
	in := filepath.Join(filepath.Dir(st), "victims.jsonl")
	if b, err := cli(t, append(slices.Clone(base), "-deployer-texts", in)...).CombinedOutput(); err != nil {
		t.Fatalf("recover -deployer-texts beside the store: %v\n%s", err, b)
	}
	texts, err := deployer.ReadTexts(mustRead(t, in))
	if err != nil {
		t.Fatal(err)
	}
	rows := writeOwnDeployerRows(t, md, texts, deployer.AttnInput, 1, filepath.Join(dir, "rows"))
	link := filepath.Join(dir, "store-link")
	if err := os.Symlink(st, link); err != nil {
		t.Fatal(err)
	}
	meta, info := filepath.Join(st, "meta.json"), filepath.Join(rows, deployer.InfoFile)
	metaBefore, infoBefore := mustRead(t, meta), mustRead(t, info)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-deployer-texts", meta}, "-deployer-texts " + meta + " lies in the -store directory"},
		{[]string{"-deployer-texts", filepath.Join(link, "meta.json")}, "lies in the -store directory"},
		{[]string{"-deployer-rows", rows, "-out", info}, "-out " + info + " lies in the -deployer-rows directory"},
		{[]string{"-table", filepath.Join(md, "t.md"), "-grid", "-axes", "dtype"}, "lies in the -model directory"},
	} {
		out, err := cli(t, append(slices.Clone(base), c.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "refusing to write into an input") {
			t.Errorf("%v: %v; want a refusal saying %q\n%s", c.args, err, c.want, out)
		}
	}
	if !bytes.Equal(mustRead(t, meta), metaBefore) || !bytes.Equal(mustRead(t, info), infoBefore) {
		t.Errorf("an input was written over")
	}
	if _, err := os.Stat(filepath.Join(md, "t.md")); err == nil {
		t.Errorf("the -table file was written into the model directory")
	}
}

// recover -h states the deployer rules this file tests: which of equal texts serves, what is
// refused, and what a finer -deployer-precision does.
func TestRecoverHelpStatesDeployerRules(t *testing.T) {
	out, _ := cli(t, "recover", "-h").CombinedOutput()
	for _, w := range []string{"the lowest id's", "NaN or infinite row", "more or fewer .npz files than its texts",
		"a finer one runs with\na WARNING in the header", "the lowest id's of equal texts", "(a finer one is warned of in the header)",
		"An output (-out, -table, -deployer-texts) inside the -store, -model or -deployer-rows directory\nis refused"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("recover -h lacks %q", w)
		}
	}
}
