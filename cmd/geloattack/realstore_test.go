package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
)

// TestRealStoreEndToEnd runs the user's path on real hidden states: store info, a short training
// run and eval on the small all-MiniLM-L6-v2 store that scripts/build-small-store.sh builds. It
// skips when that store is absent, unless GELOATTACK_REQUIRE_REAL_STORE=1 (CI sets it after
// building the store), so a missing store can never pass silently in CI.
func TestRealStoreEndToEnd(t *testing.T) {
	dir := os.Getenv("GELOATTACK_SMALL_STORE")
	if dir == "" {
		if cache, err := corpus.DefaultCacheDir(); err == nil {
			dir = filepath.Join(cache, "stores", "small-minilm-l3")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		if os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") == "1" {
			t.Fatalf("real store %s is missing: %v", dir, err)
		}
		t.Skipf("no real store at %s (build it with scripts/build-small-store.sh)", dir)
	}
	info, err := cli(t, "store", "info", "-store", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("store info: %v\n%s", err, info)
	}
	for _, w := range []string{"participation ratio", "500", "384"} {
		if !bytes.Contains(info, []byte(w)) {
			t.Fatalf("store info lacks %q:\n%s", w, info)
		}
	}

	work := t.TempDir()
	cfg := filepath.Join(work, "real.yaml")
	src := strings.Join([]string{
		"name: real",
		"store: {path: " + dir + "}",
		"sampler: {positives: 3, tokens_per_text: 8, shield_frac: 0.1, shield_scale: 0.5}",
		"model: {task: retrieval, hidden: 32, layers: 1, heads: 2, mlp_hidden: 64}",
		"train: {steps: 12, batch_size: 4, warmup_steps: 2, log_every: 4, eval_every: 6, eval_batches: 2, ckpt_every: 6}",
		"",
	}, "\n")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(work, "run")
	if out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train on the real store: %v\n%s", err, out)
	}
	metrics := mustRead(t, filepath.Join(run, "metrics.jsonl"))
	if !bytes.Contains(metrics, []byte(`"eval":"val"`)) || !bytes.Contains(metrics, []byte(`"pos_mass_chance"`)) {
		t.Fatalf("metrics.jsonl lacks the val evaluation:\n%s", metrics)
	}
	out, err := cli(t, "eval", "-batches", "2", run).CombinedOutput()
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("pos_mass")) {
		t.Fatalf("eval output lacks pos_mass:\n%s", out)
	}
}
