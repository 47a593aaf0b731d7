package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/hf"
)

// byteTok is a test tokenizer: BOS 256, then one id per byte.
type byteTok struct{}

func (byteTok) Encode(s string, add bool) ([]int, error) {
	out := []int{}
	if add {
		out = append(out, 256)
	}
	for _, c := range []byte(s) {
		out = append(out, int(c))
	}
	return out, nil
}
func (byteTok) VocabSize() int { return 257 }
func (byteTok) Hash() string   { return "test-bytes" }

// model init writes a loadable directory for every preset, and store extract on it writes a
// store whose meta.json and store info describe the decoder extraction.
func TestModelInitAndDecoderExtract(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	for _, like := range hf.Presets() {
		dir := filepath.Join(tmp, like)
		if err := cmdModelInit.run(ctx, "geloattack model init", []string{"-like", like, "-layers", "2", "-hidden", "64", "-vocab", "300", "-seed", "3", "-out", dir}, io.Discard); err != nil {
			t.Fatalf("%s: %v", like, err)
		}
		m, err := hf.Load(dir, nil)
		if err != nil {
			t.Fatalf("%s: %v", like, err)
		}
		if m.Cfg.Layers != 2 || m.Cfg.Hidden != 64 {
			t.Fatalf("%s: %+v", like, m.Cfg)
		}
	}
	texts := filepath.Join(tmp, "texts.txt")
	os.WriteFile(texts, []byte("the cat\nthe cat sat\nthe dog\n"), 0o644)
	// Without a tokenizer the decoder path is refused, naming tokenizer.json.
	err := cmdStoreExtract.run(ctx, "geloattack store extract", []string{"-model", filepath.Join(tmp, "qwen3-8b"), "-texts", texts, "-out", filepath.Join(tmp, "s0"), "-quiet", "-layer", "1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("no tokenizer: %v", err)
	}
	out := filepath.Join(tmp, "s1")
	err = runDecoderExtract(ctx, decoderExtract{modelDir: filepath.Join(tmp, "llama3-8b"), texts: texts, out: out,
		dtype: store.Float32, norm: store.NormRaw, point: "attn-input", dedup: "exact", layer: 1, batch: 64},
		func(string, int) (extraction.Tokenizer, error) { return byteTok{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	dm := s.Meta().Decoder
	// BOS + "the cat" is 8 rows; the second text repeats them, the third shares BOS + "the ".
	if dm == nil || dm.Family != "llama" || dm.Point != "attn-input" || dm.BOS != "kept" || dm.TokenizerHash != "test-bytes" ||
		dm.Dedup != "exact" || dm.DuplicateRows != 8+5 {
		t.Fatalf("decoder meta %+v", dm)
	}
	info, err := store.ComputeInfo(ctx, s, 10, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decoder", "llama (LlamaForCausalLM), point attn-input, BOS kept", "test-bytes", "13 duplicate rows"} {
		if !strings.Contains(info.String(), want) {
			t.Fatalf("store info lacks %q:\n%s", want, info)
		}
	}
	for name, args := range map[string][]string{
		"point on BERT": {"-model", t.TempDir(), "-texts", texts, "-out", filepath.Join(tmp, "s2"), "-point", "attn-input"},
		"no -like":      {"init", "-out", tmp},
		"bad dtype":     {"init", "-like", "llama2-7b", "-dtype", "fp8", "-out", tmp},
		"no sub":        {},
	} {
		var err error
		if name == "point on BERT" {
			err = cmdStoreExtract.run(ctx, "geloattack store extract", args, io.Discard)
		} else {
			err = cmdModel.run(ctx, "geloattack model", args, io.Discard)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
