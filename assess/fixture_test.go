package assess

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/models/hf"
)

// tinyDecoder writes a random-init Llama-family decoder (width 64, 2 blocks, a vocabulary of 300)
// with a byte-fallback BPE tokenizer of single letters (the pattern of cmd/geloattack's lm tests),
// and a texts file of distinct word sequences; it returns the model directory and the texts file.
func tinyDecoder(t *testing.T) (model, texts string) {
	t.Helper()
	dir := t.TempDir()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 259}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 3 + b
	}
	for c := 'a'; c <= 'z'; c++ {
		vocab[string(c)] = 260 + int(c-'a')
	}
	special := func(id int, content string) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}
	}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{
			"type":           "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "vocab": vocab, "merges": []any{}},
	}
	b, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	model = filepath.Join(dir, "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 3, DType: hf.F32, Out: model}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	words := []string{"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "sun", "hot", "pin", "is", "my"}
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	seen := map[string]bool{}
	for len(seen) < 300 {
		var w []string
		for range 2 + r.IntN(3) {
			w = append(w, words[r.IntN(len(words))])
		}
		line := strings.Join(w, " ")
		if !seen[line] {
			seen[line] = true
			sb.WriteString(line + "\n")
		}
	}
	texts = filepath.Join(dir, "texts.txt")
	if err := os.WriteFile(texts, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return model, texts
}

// tinyDeployment is the default deployment on the tiny decoder, sized for tests: n prompts in
// batches of 4 texts of 8 tokens (n + shields stays below d = 64 at the default 10% shields),
// without secret templates (the default PIN template does not fit 8 tokens of single letters;
// the tests of content recovery give their own).
func tinyDeployment(model, texts string, n int) Deployment {
	d := DefaultDeployment()
	d.Model, d.Prompts.Texts, d.Prompts.Count = model, texts, n
	d.Batch.TokensPerText = 8
	d.Secrets.Templates = nil
	return d
}
