package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/bpe/bpetest"
)

// writeTinyLM writes a SentencePiece-style tokenizer (<unk> <s> </s>, the 256 byte tokens, "▁"
// and the letters a-z, no merges), a text file of 400 random short texts and an lm config of a
// 2-block decoder over them; it returns the config's path.
func writeTinyLM(t *testing.T, dir, steps string) string {
	t.Helper()
	tj := bpetest.Letters()
	tj["decoder"] = nil
	b, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tok, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	var texts strings.Builder
	for i := 0; i < 400; i++ {
		for w := 0; w < 2+r.IntN(5); w++ {
			// A few words repeat often, so the model has something to learn.
			texts.WriteString([]string{"the ", "cat ", "sat ", "on ", "a ", "mat ", "xq "}[r.IntN(7)])
		}
		texts.WriteString("\n")
	}
	txt := filepath.Join(dir, "texts.txt")
	if err := os.WriteFile(txt, []byte(texts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`name: tiny-lm
seed: 5
model: {task: lm}
lm:
  texts: %s
  tokenizer: %s
  val_frac: 0.2
  model: {hidden: 16, layers: 2, heads: 2, mlp: 32, seq: 16}
train: {steps: %s, batch_size: 4, lr: 1.0e-2, warmup_steps: 5, log_every: 3, eval_every: 10, eval_batches: 2, ckpt_every: 5, keep_ckpts: 2}
`, txt, tok, steps)
	p := filepath.Join(dir, "lm.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLMKillNineAndResumeReproducesMetrics: a language-model run killed with SIGKILL and
// resumed writes exactly the metrics of an uninterrupted one.
func TestLMKillNineAndResumeReproducesMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model twice")
	}
	dir := t.TempDir()
	checkKillNineResume(t, dir, writeTinyLM(t, dir, "300"), 300)
}

// TestLMTrainsBelowTheBigram: the tiny language model's val perplexity falls below the add-one
// bigram's on the same tokens, and the report carries the baselines beside it.
func TestLMTrainsBelowTheBigram(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTinyLM(t, dir, "800")
	run := filepath.Join(dir, "run")
	out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	var rep struct {
		Final map[string]map[string]float64 `json:"final"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(run, "report.json")), &rep); err != nil {
		t.Fatal(err)
	}
	val := rep.Final["val"]
	if !(val["ppl"] < val["ppl_bigram"] && val["ppl_bigram"] < val["ppl_unigram"]) {
		t.Fatalf("val ppl %.3f, bigram %.3f, unigram %.3f: want ppl < bigram < unigram\n%s", val["ppl"], val["ppl_bigram"], val["ppl_unigram"], out)
	}
	if !bytes.Contains(out, []byte("ppl_bigram")) {
		t.Errorf("the final table lacks the bigram baseline:\n%s", out)
	}
	t.Logf("val ppl %.3f, bigram %.3f, unigram %.3f", val["ppl"], val["ppl_bigram"], val["ppl_unigram"])
}
