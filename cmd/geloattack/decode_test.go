package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/models/hf"
)

// printDecode's bag-only totals average the batches' precision, recall and ranking recall and
// take the worst margin and the worst rank of a true token; the order's columns show "-".
func TestPrintDecodeBagOnly(t *testing.T) {
	res := []decode.BatchResult{
		{Index: 0, Truth: [][]int{{1, 2}}, N: 80, Rank: []int{80}, D: 64, BagPrecision: 0.5, BagRecall: 1, BagMargin: -0.05,
			BagRankRecall: 0.75, BagWorstRank: 9, BagMarginTopK: -0.03, BagTopK: 32, BagRankRecallTopK: 0.5,
			OrderMargin: math.NaN(), Exact: math.NaN(), TokenAcc: math.NaN(), Seconds: 2},
		{Index: 1, Truth: [][]int{{3, 4}}, N: 80, Rank: []int{80}, D: 64, BagPrecision: 1, BagRecall: 0.5, BagMargin: 0.2,
			BagRankRecall: 1, BagWorstRank: 2, BagMarginTopK: 0.1, BagTopK: 32, BagRankRecallTopK: 1,
			OrderMargin: math.NaN(), Exact: math.NaN(), TokenAcc: math.NaN(), Seconds: 3},
	}
	var b bytes.Buffer
	printDecode(&b, res, true)
	out := b.String()
	for _, want := range []string{
		"| 0 | 1 | 80 | 80 of 64 | 0.50 / 1.00 | -0.05 | - | - | - | 0 (0) | 0 | 2.0 |",
		"total: 2 texts in 2 batches: bag only: precision 0.750, recall 0.750, worst bag margin -0.05 decades, ranking recall 0.875 (worst true token ranked 9) (top-k containment: -0.03 decades, k 32, ranking recall 0.750), rank [80] of 64, in 5.0 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NaN") {
		t.Errorf("a bag-only table prints NaN for what it did not measure:\n%s", out)
	}
}

// tinyDecoder writes a random-init Llama-2-shaped decoder (2 blocks of 64, weights of dtype drawn
// from seed) with the lm tests' byte-level tokenizer beside its weights; it returns the model
// directory and the lm tests' texts, for the decoder commands' tests (decode, assess).
func tinyDecoder(t *testing.T, seed uint64, dtype string) (model, texts string) {
	t.Helper()
	dir := t.TempDir()
	writeTinyLM(t, dir, "1")
	model = filepath.Join(dir, "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: seed, DType: dtype, Out: model}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "tokenizer.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return model, filepath.Join(dir, "texts.txt")
}

// runDecode runs geloattack decode with args, returning its standard output.
func runDecode(t *testing.T, args ...string) (string, error) {
	t.Helper()
	stdout := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	err = cmdDecode.run(context.Background(), "geloattack decode", args, io.Discard)
	w.Close()
	os.Stdout = stdout
	return string(<-done), err
}

// The command end to end: 3 batches into a directory, the same as 2 shards merged (results.jsonl
// and summary.json byte-equal, the same table); a -resume with another -beam is refused naming
// it; the table shows each true text beside the decoded one, and -redact hides both.
func TestDecodeDirectoryShardsAndMerge(t *testing.T) {
	model, texts := tinyDecoder(t, 4, hf.BF16)
	tmp := t.TempDir()
	common := []string{"-model", model, "-texts", texts, "-max-texts", "40", "-max-tokens", "8", "-split", "train", "-batches", "3", "-quiet",
		"-blocks", "0,1", "-shield-frac", "0.05", "-shield-scale", "10"}
	whole := filepath.Join(tmp, "whole")
	table, err := runDecode(t, append(common, "-out", whole)...)
	if err != nil {
		t.Fatal(err)
	}
	var shards []string
	for i := range 2 {
		dir := filepath.Join(tmp, fmt.Sprintf("shard%d", i))
		if _, err := runDecode(t, append(common, "-out", dir, "-shard", fmt.Sprintf("%d/2", i))...); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, dir)
	}
	merged := filepath.Join(tmp, "merged")
	mergedTable, err := runDecode(t, append([]string{"-merge", "-out", merged}, shards...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{decode.OptionsFile, decode.ResultsFile, decode.SummaryFile} {
		a, _ := os.ReadFile(filepath.Join(whole, name))
		b, _ := os.ReadFile(filepath.Join(merged, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the merged shards' differs from one run's:\n%s\n---\n%s", name, a, b)
		}
	}
	if a, b := totalsBeforeTime(table), totalsBeforeTime(mergedTable); a == "" || a != b {
		t.Errorf("totals differ: one run\n%s\nmerged\n%s", a, b)
	}
	if _, err := runDecode(t, append(common, "-out", whole, "-resume", "-beam", "8")...); err == nil || !strings.Contains(err.Error(), `beam: "0" on disk, "8" now`) {
		t.Errorf("-resume with another -beam: %v, want a refusal naming beam", err)
	}
	resumed, err := runDecode(t, append(common, "-out", whole, "-resume")...)
	if err != nil || !strings.Contains(resumed, "\ntotal: ") {
		t.Errorf("-resume of a finished run: %v, want its table without a model load:\n%s", err, resumed)
	}
	var res []decode.BatchResult
	b, err := os.ReadFile(filepath.Join(whole, decode.ResultsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	tok, err := openDecoderTokenizer(model, 300)
	if err != nil {
		t.Fatal(err)
	}
	dec := textsOf(tok)
	first := res[0].Truth[0]
	want := strconv.Quote(dec.Decode(first[1:])) // BOS left out
	if res[0].Exact != 1 || !strings.Contains(table, "| 0 | 0 | yes | ") || !strings.Contains(table, want+" | "+want+" |") {
		t.Errorf("the table lacks batch 0's first true text %s beside its decoded text (batch 0 exact %v):\n%s", want, res[0].Exact, table)
	}
	redacted, err := runDecode(t, append([]string{"-merge", "-redact", "-out", filepath.Join(tmp, "merged2")}, shards...)...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(redacted, want) || !strings.Contains(redacted, "(redacted)") {
		t.Errorf("-redact shows the texts:\n%s", redacted)
	}
}

// totalsBeforeTime is the table's total line up to the wall time, which differs between runs.
func totalsBeforeTime(table string) string {
	_, after, ok := strings.Cut(table, "\ntotal: ")
	if !ok {
		return ""
	}
	before, _, _ := strings.Cut(after, " candidate forwards in ")
	return before
}
