package assess

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/bpe/bpetest"
	"github.com/gelo-research/geloattack/models/hf"
)

// tinyDecoder writes a random-init Llama-family decoder (width 64, 2 blocks, a vocabulary of 300)
// with a byte-fallback BPE tokenizer of single letters (bpetest.Letters),
// and a texts file of distinct word sequences; it returns the model directory and the texts file.
func tinyDecoder(t *testing.T) (model, texts string) {
	t.Helper()
	dir := t.TempDir()
	tj := bpetest.Letters()
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
