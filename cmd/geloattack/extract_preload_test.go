package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/runner"
)

// store extract -model refuses before it reads a tensor: over weight data truncated after its
// header, a -layer past the model's depth and a -max-tokens past its context are refused by
// name, and a config.json past the machine gets the resource pre-flight's estimate by part
// (from the headers), not the truncation; only a model the memory holds reaches the files'
// check, which names the truncation.
func TestExtractRefusesBeforeReading(t *testing.T) {
	t.Setenv(runner.SkipPreflightEnv, "")
	dir := t.TempDir()
	md := filepath.Join(dir, "m")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 1, DType: hf.F32, Out: md}); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(md, hf.WeightsFile)
	h, err := safetensors.ReadHeader(weights)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(weights, h.DataStart+8); err != nil {
		t.Fatal(err)
	}
	texts := filepath.Join(dir, "texts.txt")
	if err := os.WriteFile(texts, []byte("one text\nanother text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	extract := func(extra ...string) error {
		args := append([]string{"-model", md, "-texts", texts, "-out", filepath.Join(dir, "s"), "-quiet"}, extra...)
		return cmdStoreExtract.run(t.Context(), "geloattack store extract", args, io.Discard)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-layer", "3"}, []string{"-layer 3: residual rows exist for layers 0..2"}},
		{[]string{"-layer", "2", "-point", "attn-input"}, []string{"-layer 2: attn-input rows exist for layers 0..1"}},
		{[]string{"-layer", "1", "-max-tokens", "5000"}, []string{"-max-tokens 5000", "at most 4096"}},
		{[]string{"-layer", "1", "-norm", "l2"}, []string{"-norm", "l2"}},
		{[]string{"-layer", "1"}, []string{weights, "truncated"}},
	} {
		if err := extract(c.args...); err == nil || !containsAll(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	editDecoderConfig(hugeModel)(t, md)
	err = extract("-layer", "1")
	if err == nil || !containsAll(err.Error(), []string{"resource pre-flight", "weights (float32, 128 blocks)", "workspace"}) {
		t.Errorf("a 2 TB model over truncated data: %v", err)
	}
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
