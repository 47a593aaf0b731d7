package assess

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
)

// extractStore writes a decoder store of the deployment's model as `store extract -model` does:
// attn-input rows of block, raw, texts cut to the deployment's tokens per text.
func extractStore(t *testing.T, d Deployment, block int) string {
	t.Helper()
	tg, err := OpenModel(d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := corpus.ReadSource(d.Prompts.Texts, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	w, err := store.Create(dir, store.Meta{Model: tg.Name, Layer: block, D: tg.D, E: tg.D, DType: store.Float32, Norm: store.NormRaw,
		Source: "test", MaxTokens: d.Batch.TokensPerText})
	if err != nil {
		t.Fatal(err)
	}
	tok := tg.Tok.(extraction.Tokenizer)
	st, err := extraction.RunDecoder(context.Background(), tg.LM, tok, src.Texts, extraction.DecoderOptions{Layer: block, Point: llama.AttnInput,
		MaxTokens: d.Batch.TokensPerText, Workers: 1}, w)
	if err != nil {
		t.Fatal(err)
	}
	w.SetDecoder(store.DecoderMeta{Family: hf.Family(tg.Architecture), Architecture: tg.Architecture, Point: llama.AttnInput.String(),
		BOS: st.BOS, TokenizerHash: tok.Hash(), Dedup: "none", Embedding: extraction.DecoderEmbedding})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// trainRun trains a tiny retrieval model for a few steps on the store (the synthetic one when
// storeDir is empty) and returns its run directory.
func trainRun(t *testing.T, storeDir string) string {
	t.Helper()
	st := "store: {synth: {texts: 120, min_tokens: 8, max_tokens: 16, d: 16, e: 8}}\n"
	if storeDir != "" {
		st = fmt.Sprintf("store: {path: %q}\n", storeDir)
	}
	src := "name: tiny\nseed: 7\n" + st + `sampler:
  positives: [4, 4]
  tokens_per_text: 8
  shield_frac: 0.1
model: {task: retrieval, hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}
train: {steps: 8, batch_size: 4, warmup_steps: 1, log_every: 4, eval_every: 8, eval_batches: 1, ckpt_every: 8, keep_ckpts: 1, workers: 1}
device: cpu
`
	cfg, err := config.Parse("tiny.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := runner.Train(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The learned attack runs a checkpoint trained on a store of this model at an offloaded block:
// each prompt ranked against the batch's 4 decoys, a ranked guess with chance level 1/5, never a
// claim; the candidates' embeddings are the store's own (extraction's definition, recomputed); a
// checkpoint that does not fit the deployment is refused naming what differs.
func TestLearnedAttack(t *testing.T) {
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 8)
	storeDir := extractStore(t, d, 1)
	runDir := trainRun(t, storeDir)
	d.Attacker.Attacks = []string{"learned"}
	d.Attacker.Learned = runDir
	dir, res := run(t, d, Options{})
	a := res.Summary.Attacks[0]
	c := a.Cells[0]
	if a.Name != "learned" || a.NotApplicable != "" || c.Prompts != 8 || c.Claims != 0 || c.Wrong != 0 || math.Abs(c.Chance-0.2) > fptol.Gamma(c.Prompts, fptol.Float64) {
		t.Fatalf("learned: %+v", a)
	}
	rows, err := ReadRows(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	firsts := 0
	for _, r := range rows {
		if r.Candidates != 5 || r.Rank < 1 || r.Rank > 5 || r.Success != (r.Rank == 1) || r.Claimed {
			t.Errorf("row %d: %d candidates, rank %d, success %v, claimed %v", r.Prompt, r.Candidates, r.Rank, r.Success, r.Claimed)
		}
		if r.Rank == 1 {
			firsts++
		}
	}
	md := readFile(t, filepath.Join(dir, ReportMD))
	verdict := "no success at this budget: "
	if firsts > 0 {
		verdict = "ranks the prompt first among it and the batch's decoys (a ranked guess): "
	}
	if want := fmt.Sprintf("| learned | %s%s; chance level 0.200 | none: a ranked guess, never a claim (0 wrong claims) |", verdict, c.Interval); !bytes.Contains(md, []byte(want)) {
		t.Errorf("report.md lacks %q:\n%s", want, md)
	}
	if dep := readFile(t, filepath.Join(dir, DeploymentFile)); !bytes.Contains(dep, []byte("block: 1\n")) || !bytes.Contains(dep, []byte("step: 8\n")) {
		t.Errorf("deployment.yaml does not record the checkpoint read:\n%s", dep)
	}

	// The embedding assess computes is the store's (same definition, another batch packing).
	tg, err := OpenModel(d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.LoadPrompts(context.Background(), d, new(safefile.Files)); err != nil {
		t.Fatal(err)
	}
	lm, _, err := openLearned(res.Deployment, tg)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.close()
	st, err := store.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checked := 0
	tol := fptol.Chain(2*tg.Blocks+2, 4*tg.D, fptol.Float32)
	for i := range st.NumTexts() {
		for _, p := range tg.Prompts {
			if st.TextID(i) != p.ID {
				continue
			}
			want := make([]float32, tg.D)
			if err := st.TextEmbedding(i, want); err != nil {
				t.Fatal(err)
			}
			got, err := lm.embedding(context.Background(), p.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if math.Abs(float64(got[j]-want[j])) > tol {
					t.Fatalf("prompt %d: embedding[%d] %v, the store's %v (tolerance %.3g)", p.ID, j, got[j], want[j], tol)
				}
			}
			checked++
		}
	}
	if checked != len(tg.Prompts) {
		t.Fatalf("compared %d of %d prompts' embeddings with the store's", checked, len(tg.Prompts))
	}

	// What does not fit is refused before any work, naming it.
	other := d
	other.Offload.Blocks = []int{0}
	other.Attacker.Blocks = []int{0}
	if _, err := Run(context.Background(), other, Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "block 1's rows, which GELO does not offload") {
		t.Errorf("a checkpoint of a block not offloaded: %v", err)
	}
	narrow := filepath.Join(filepath.Dir(filepath.Dir(model)), "narrow", "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 32, Vocab: 300, Seed: 3, DType: hf.F32, Out: narrow}); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(model, "tokenizer.json"), filepath.Join(narrow, "tokenizer.json"))
	other = d
	other.Model = narrow
	if _, err := Run(context.Background(), other, Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "rows of d = 64; the deployment's model has d = 32") {
		t.Errorf("a checkpoint of a model of another width: %v", err)
	}
	other = d
	other.Attacker.Learned = trainRun(t, "")
	if _, err := Run(context.Background(), other, Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "synthetic store") {
		t.Errorf("a checkpoint of the synthetic store: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b := readFile(t, from)
	if err := safefile.WriteFileAtomic(to, b); err != nil {
		t.Fatal(err)
	}
}
