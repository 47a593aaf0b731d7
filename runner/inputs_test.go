package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
)

// lmTokenizer is a tokenizer.json of a SentencePiece-style BPE without merges: <unk> <s> </s>,
// the word marker ▁, the letters a-h, and byte fallback for everything else (ids 12..267). swap
// exchanges the ids of "a" and "b": a tokenizer of the same size that reads texts differently.
func lmTokenizer(t *testing.T, swap bool) []byte {
	t.Helper()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3}
	for i, c := range "abcdefgh" {
		vocab[string(c)] = 4 + i
	}
	for b := range 256 {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 12 + b
	}
	if swap {
		vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
	}
	added := func(id int, s string) map[string]any {
		return map[string]any{"id": id, "content": s, "special": true, "normalized": false,
			"single_word": false, "lstrip": false, "rstrip": false}
	}
	b, err := json.Marshal(map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "pre_tokenizer": nil, "decoder": nil,
		"added_tokens": []any{added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "vocab": vocab, "merges": []any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lmFixture writes texts.txt, tokenizer.json and a 4-step task-lm config into root.
func lmFixture(t *testing.T, root string) config.Run {
	t.Helper()
	var texts strings.Builder
	words := []string{"bad", "cab", "fed", "head", "dab", "ace"}
	for i := range 120 {
		fmt.Fprintf(&texts, "%s %s %s\n", words[i%6], words[(i/6)%6], words[(i*5)%6])
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	txt := write("texts.txt", []byte(texts.String()))
	tok := write("tokenizer.json", lmTokenizer(t, false))
	src := fmt.Sprintf(`name: tiny-lm
seed: 3
device: cpu
model: {task: lm}
lm:
  texts: %s
  tokenizer: %s
  val_frac: 0.25
  model: {hidden: 8, layers: 1, heads: 2, mlp: 16, seq: 8}
train: {steps: 4, batch_size: 2, warmup_steps: 1, log_every: 2, eval_every: 4, eval_batches: 1, ckpt_every: 2, keep_ckpts: 3}
`, txt, tok)
	cfg, err := config.Parse("tiny-lm.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A task-lm checkpoint records digests of its texts and tokenizer (and tokenizer_config.json);
// -resume refuses when one changed, naming the key, the file and both digests, and with
// AcceptChangedInputs continues on the new inputs, saying so in the run header and in a
// metrics.jsonl record at the step it resumed from. Before, a resume over changed texts or a
// changed tokenizer trained on silently.
func TestResumeComparesLMInputs(t *testing.T) {
	for _, c := range []struct {
		name, key string
		change    func(t *testing.T, root string)
	}{
		{"texts", "lm.texts", func(t *testing.T, root string) {
			p := filepath.Join(root, "texts.txt")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, bytes.Replace(b, []byte("cab"), []byte("cad"), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"tokenizer", "lm.tokenizer", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "tokenizer.json"), lmTokenizer(t, true), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"tokenizer_config", "lm.tokenizer_config", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "tokenizer_config.json"), []byte(`{"add_bos_token": true}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := lmFixture(t, root)
			run := filepath.Join(root, "run")
			if _, err := Train(context.Background(), cfg, run, false, nil); err != nil {
				t.Fatal(err)
			}
			first, _, err := checkpoints.LoadLatestGood(run)
			if err != nil {
				t.Fatal(err)
			}
			was, ok, err := inputsOf(first)
			if err != nil || !ok {
				t.Fatalf("the checkpoint records no inputs: %v", err)
			}
			c.change(t, root)
			more := cfg
			more.Train.Steps = 8
			var log strings.Builder
			_, err = Train(context.Background(), more, run, true, &log)
			if err == nil {
				t.Fatalf("resume over a changed %s succeeded:\n%s", c.key, log.String())
			}
			for _, want := range []string{c.key, first.Path, "-accept-changed-inputs", "sha256:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal lacks %q: %v", want, err)
				}
			}
			log.Reset()
			if _, err := TrainWith(context.Background(), more, run, RunOptions{Resume: true, AcceptChangedInputs: true}, &log); err != nil {
				t.Fatalf("resume accepting changed inputs: %v\n%s", err, log.String())
			}
			if !strings.Contains(log.String(), "-accept-changed-inputs: continuing from step 4 on changed inputs: "+c.key) {
				t.Errorf("the run header does not say the changed inputs were accepted:\n%s", log.String())
			}
			metrics, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(metrics, []byte(`"event":"accept_changed_inputs"`)) || !bytes.Contains(metrics, []byte(`"`+c.key+`":{"now":"sha256:`)) ||
				!bytes.Contains(metrics, []byte(`"step":4}`)) {
				t.Errorf("metrics.jsonl lacks the record of the accepted change:\n%s", metrics)
			}
			last, _, err := checkpoints.LoadLatestGood(run)
			if err != nil {
				t.Fatal(err)
			}
			now, _, err := inputsOf(last)
			if err != nil || last.State.Step != 8 || now == was {
				t.Errorf("checkpoint %s at step %d records %+v (%v); want the new inputs, not %+v", last.Path, last.State.Step, now, err, was)
			}
		})
	}
}

// model export takes the tokenizer the run trained with (the run directory's copy, checked
// against the checkpoint's digests), not the file at the config's lm.tokenizer, which changed
// since: the exported tokenizer.json is the original, byte for byte. A copy that does not match
// the checkpoint is refused naming both digests. Before, export read lm.tokenizer as it is today
// and exported a tokenizer the model never saw.
func TestExportLMTakesTheRunsTokenizer(t *testing.T) {
	root := t.TempDir()
	cfg := lmFixture(t, root)
	run := filepath.Join(root, "run")
	if _, err := Train(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	orig := lmTokenizer(t, false)
	swapped := lmTokenizer(t, true)
	if err := os.WriteFile(filepath.Join(root, "tokenizer.json"), swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "exported")
	ex, err := ExportLM(run, out, "F32")
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(out, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, orig) || ex.Tokenizer != filepath.Join(run, RunTokenizerFile) {
		t.Errorf("exported the tokenizer from %s (%d bytes, the original: %v); want the run's copy, the original",
			ex.Tokenizer, len(got), bytes.Equal(got, orig))
	}
	// The run's copy replaced: refused, nothing written.
	if err := os.WriteFile(filepath.Join(run, RunTokenizerFile), swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(root, "exported2")
	_, err = ExportLM(run, out2, "F32")
	if err == nil || !strings.Contains(err.Error(), "lm.tokenizer") || !strings.Contains(err.Error(), "is not the tokenizer checkpoint") {
		t.Fatalf("export with a replaced copy: %v, want a refusal naming lm.tokenizer and the checkpoint", err)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("the refused export left %s (%v)", out2, err)
	}
}

// A checkpoint resealed (rewritten with valid checksums) with a run_config key this build does
// not know is refused on resume, naming the file and the key. Before, the key was dropped and the
// run resumed.
func TestResumeRefusesUnknownRunConfigKey(t *testing.T) {
	cfg := tinyRun(t, "device: cpu\n")
	run := filepath.Join(t.TempDir(), "run")
	if _, err := Train(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	ck, _, err := checkpoints.LoadLatestGood(run)
	if err != nil {
		t.Fatal(err)
	}
	var rc map[string]any
	if err := json.Unmarshal([]byte(ck.Metadata[MetaRunConfig]), &rc); err != nil {
		t.Fatal(err)
	}
	rc["train"].(map[string]any)["shortcut"] = true
	b, err := json.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	ck.Metadata[MetaRunConfig] = string(b)
	if err := checkpoints.SaveCheckpoint(run, ck.State.Step, ck.Weights, ck.State, ck.Metadata); err != nil {
		t.Fatalf("reseal: %v", err)
	}
	more := cfg
	more.Train.Steps = 8
	_, err = Train(context.Background(), more, run, true, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown field "shortcut"`) || !strings.Contains(err.Error(), ck.Path) || !strings.Contains(err.Error(), MetaRunConfig) {
		t.Fatalf("resume from a checkpoint with an unknown run_config key: %v; want a refusal naming the file, %s and the key", err, MetaRunConfig)
	}
	if _, err := ResumeConfig(run); err == nil || !strings.Contains(err.Error(), `"shortcut"`) {
		t.Errorf("ResumeConfig: %v, want the unknown key refused", err)
	}
}
