package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/corpus"
)

// TestMain lets the tests run the real CLI in a child process (the test binary re-executed with
// GELOATTACK_TEST_MAIN=1), so that a kill -9 hits a real training process.
func TestMain(m *testing.M) {
	if os.Getenv("GELOATTACK_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinyConfig trains in a second or two: a small synthetic store and a two-layer model.
const tinyConfig = `name: tiny
seed: 7
store:
  synth: {texts: 200, min_tokens: 8, max_tokens: 24, d: 32, e: 16}
sampler:
  positives: [2, 3]
  tokens_per_text: 8
  shield_frac: 0.25
model: {task: retrieval, hidden: 16, layers: 2, heads: 2, mlp_hidden: 32}
train: {steps: STEPS, batch_size: 4, warmup_steps: 5, log_every: 3, eval_every: 10, eval_batches: 2, ckpt_every: 5, keep_ckpts: 2, workers: 2}
`

func cli(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GELOATTACK_TEST_MAIN=1")
	return cmd
}

func writeConfig(t *testing.T, dir string, steps string) string {
	t.Helper()
	src := strings.Replace(tinyConfig, "STEPS", steps, 1)
	p := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKillNineAndResumeReproducesMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model twice")
	}
	dir := t.TempDir()
	checkKillNineResume(t, dir, writeConfig(t, dir, "300"), 300)
}

// checkKillNineResume trains cfg (steps steps, checkpoints every 5) once to the end and once
// killed with SIGKILL after its second checkpoint and resumed: both runs' metrics.jsonl must be
// the same bytes.
func checkKillNineResume(t *testing.T, dir, cfg string, steps int64) {
	t.Helper()
	ref := filepath.Join(dir, "ref")
	if out, err := cli(t, "train", "-config", cfg, "-out", ref).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}

	run := filepath.Join(dir, "run")
	child := cli(t, "train", "-config", cfg, "-out", run)
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill as soon as a checkpoint past the first exists: the run is then mid-way, with metric
	// lines (and perhaps a checkpoint write) beyond the checkpoint that resume will use.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, step, err := checkpoints.LatestPath(run); err == nil && step >= 10 {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatalf("no checkpoint after 60 s:\n%s", childOut.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	_, killedAt, err := checkpoints.LatestPath(run)
	if err != nil {
		t.Fatal(err)
	}
	if killedAt >= steps {
		t.Skipf("the run finished (step %d) before the kill landed; nothing to resume", killedAt)
	}
	if out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput(); err == nil {
		t.Fatalf("restarting a run without -resume must refuse to overwrite it:\n%s", out)
	}
	if out, err := cli(t, "train", "-config", cfg, "-out", run, "-resume").CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	want, got := mustRead(t, filepath.Join(ref, "metrics.jsonl")), mustRead(t, filepath.Join(run, "metrics.jsonl"))
	if !bytes.Equal(want, got) {
		t.Fatalf("killed at checkpoint %d and resumed: metrics.jsonl differs\nwant:\n%s\ngot:\n%s", killedAt, want, got)
	}
	if n := bytes.Count(want, []byte("\n")); n < 30 {
		t.Fatalf("only %d metric lines", n)
	}
}

func TestEvalOnRunDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "10")
	run := filepath.Join(dir, "run")
	if out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	out, err := cli(t, "eval", "-batches", "3", run).CombinedOutput()
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	for _, w := range []string{"pos_mass", "chance", "top1"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Fatalf("eval output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(run, "eval.json")); err != nil {
		t.Fatal(err)
	}
	// A checkpoint named by -ckpt is evaluated under its own name: the run's eval.json stays.
	before := mustRead(t, filepath.Join(run, "eval.json"))
	ckpts, _ := filepath.Glob(filepath.Join(run, "ckpt-*.safetensors"))
	if len(ckpts) == 0 {
		t.Fatal("no checkpoint in the run")
	}
	if out, err := cli(t, "eval", "-batches", "2", "-ckpt", ckpts[0]).CombinedOutput(); err != nil {
		t.Fatalf("eval -ckpt: %v\n%s", err, out)
	}
	if !bytes.Equal(before, mustRead(t, filepath.Join(run, "eval.json"))) {
		t.Error("eval -ckpt replaced the run's eval.json")
	}
	name := "eval-" + strings.TrimSuffix(filepath.Base(ckpts[0]), ".safetensors") + ".json"
	if _, err := os.Stat(filepath.Join(run, name)); err != nil {
		t.Errorf("eval -ckpt wrote no %s: %v", name, err)
	}
}

// eval with the run's own batch count reproduces its final table exactly; the default (more
// batches) says that it differs and how to reproduce it.
func TestEvalReproducesTheRunsFinalTable(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "10")
	run := filepath.Join(dir, "run")
	if out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	var report struct {
		Final map[string]map[string]float64 `json:"final"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(run, "report.json")), &report); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, "eval", "-batches", "2", "-out", filepath.Join(dir, "e"), run).CombinedOutput()
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("note:")) {
		t.Errorf("eval with the run's own batches printed a note:\n%s", out)
	}
	var ev struct {
		Metrics map[string]map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "e", "eval.json")), &ev); err != nil {
		t.Fatal(err)
	}
	for _, split := range []string{"train", "val"} {
		for k, v := range report.Final[split] {
			if ev.Metrics[split][k] != v {
				t.Errorf("%s %s: eval %v, run's final table %v", split, k, ev.Metrics[split][k], v)
			}
		}
	}
	out, err = cli(t, "eval", "-out", filepath.Join(dir, "e32"), run).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("train.eval_batches = 2")) || !bytes.Contains(out, []byte("-batches 2 -batch-size 4 reproduces")) {
		t.Fatalf("default eval: %v, want a note naming the run's 2 batches:\n%s", err, out)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBaselineRowSpaceFindsEverySourceText(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "10")
	out, err := cli(t, "baseline", "-attack", "rowspace", "-config", cfg, "-examples", "8", "-out", filepath.Join(dir, "rs.json")).CombinedOutput()
	if err != nil {
		t.Fatalf("baseline: %v\n%s", err, out)
	}
	// Every row observed, n < d, float32: containment is exact, so the best candidate is always
	// a source text (SPEC §7).
	if !bytes.Contains(out, []byte("top1   1.0000")) {
		t.Fatalf("row-space top-1 is not exact:\n%s", out)
	}
	for _, attack := range []string{"fastica", "jd", "anchor"} {
		if out, err := cli(t, "baseline", "-attack", attack, "-config", cfg, "-examples", "1").CombinedOutput(); err != nil {
			t.Fatalf("baseline -attack %s: %v\n%s", attack, err, out)
		}
	}
	if out, err := cli(t, "baseline", "-attack", "pca", "-config", cfg).CombinedOutput(); err == nil {
		t.Fatalf("unknown attack accepted:\n%s", out)
	}
}

func TestDefaultRunDirectoryIsNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "2")
	for i, want := range []string{"runs/tiny", "runs/tiny-2"} {
		cmd := cli(t, "train", "-config", cfg)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if _, _, err := checkpoints.LatestPath(filepath.Join(dir, want)); err != nil {
			t.Fatalf("run %d: no checkpoint in %s: %v", i, want, err)
		}
	}
}

// Resuming checks the run's own config: a changed setting is refused (naming it) and leaves
// config.yaml alone; without -config the run's own config is used.
func TestResumeUsesAndChecksTheRunsConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "4")
	run := filepath.Join(dir, "run")
	if out, err := cli(t, "train", "-config", cfg, "-out", run).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	before := mustRead(t, filepath.Join(run, "config.yaml"))
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, bytes.Replace(mustRead(t, cfg), []byte("shield_frac: 0.25"), []byte("shield_frac: 0.5"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, "train", "-config", other, "-out", run, "-resume", "-steps", "6").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("sampler.shield_frac: 0.25 -> 0.5")) {
		t.Fatalf("resume with another config: err %v\n%s", err, out)
	}
	if !bytes.Equal(before, mustRead(t, filepath.Join(run, "config.yaml"))) {
		t.Fatal("a refused resume rewrote config.yaml")
	}
	if out, err := cli(t, "train", "-out", run, "-resume", "-steps", "6").CombinedOutput(); err != nil {
		t.Fatalf("resume with the run's own config: %v\n%s", err, out)
	}
	if !bytes.Contains(mustRead(t, filepath.Join(run, "metrics.jsonl")), []byte(`"step":6`)) {
		t.Fatal("resumed run did not reach step 6")
	}
}

// SIGINT checkpoints and exits with status 130, naming the command that continues the run.
func TestInterruptExitsWith130(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "100000")
	run := filepath.Join(dir, "run")
	child := cli(t, "train", "-config", cfg, "-out", run)
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, _, err := checkpoints.LatestPath(run); err == nil {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatalf("no checkpoint after 60 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	child.Process.Signal(os.Interrupt)
	err := child.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want status 130\n%s", err, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("-resume -out "+run)) {
		t.Fatalf("no resume command in the output:\n%s", out.String())
	}
}

// A bad store stops `train` with one line that names the store, the file and what is wrong.
func TestBadStoreGivesOneLineError(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if out, err := cli(t, "store", "synth", "-out", good, "-texts", "40", "-d", "16", "-e", "8").CombinedOutput(); err != nil {
		t.Fatalf("store synth: %v\n%s", err, out)
	}
	truncated := filepath.Join(dir, "truncated")
	if err := os.CopyFS(truncated, os.DirFS(good)); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(truncated, "tokens.arrow")
	b := mustRead(t, tok)
	if err := os.WriteFile(tok, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, store, want string }{
		{"missing", filepath.Join(dir, "nowhere"), "nowhere"},
		{"truncated", truncated, "tokens.arrow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, c.name+".yaml")
			src := "name: bad\nstore: {path: " + c.store + "}\nmodel: {hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}\n"
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := cli(t, "train", "-config", cfg, "-out", filepath.Join(dir, "run-"+c.name)).CombinedOutput()
			if err == nil {
				t.Fatalf("train on a %s store succeeded:\n%s", c.name, out)
			}
			lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
			if len(lines) != 1 || !bytes.Contains(lines[0], []byte(c.want)) {
				t.Fatalf("want one line naming %q, got:\n%s", c.want, out)
			}
		})
	}
}

// Bare `geloattack` shows the commands and starts nothing; typed zeros and negatives on flags are
// refused naming the flag, never read as "keep the default".
func TestBareCommandAndBadFlagValues(t *testing.T) {
	dir := t.TempDir()
	cmd := cli(t)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("usage: geloattack <command>")) {
		t.Fatalf("bare geloattack: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("bare geloattack wrote %v", ents)
	}
	cfg := writeConfig(t, dir, "10")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "-config", cfg, "-steps", "-3"}, `"-3" for flag -steps`},
		{[]string{"train", "-config", cfg, "-workers", "0"}, `"0" for flag -workers`},
		{[]string{"eval", "-batches", "-1", dir}, `"-1" for flag -batches`},
		{[]string{"store", "synth", "-texts", "0", "-out", filepath.Join(dir, "s")}, `"0" for flag -texts`},
		{[]string{"store", "synth", "-d", "0", "-out", filepath.Join(dir, "s")}, `"0" for flag -d`},
		{[]string{"sweep", "-config", cfg, "-shards", "0"}, `"0" for flag -shards`},
		{[]string{"train", "-config", cfg, "extra"}, `unexpected argument "extra": this command takes only flags`},
	} {
		out, err := cli(t, c.args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte(c.want)) {
			t.Errorf("%v: %v, want a refusal containing %q:\n%s", c.args, err, c.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); err == nil {
		t.Error("a refused store synth created its output")
	}
}

// store -h explains every subcommand (it was one line).
func TestStoreHelpExplainsEverySubcommand(t *testing.T) {
	out, _ := cli(t, "store", "-h").CombinedOutput()
	for _, w := range []string{"synth ", "import ", "extract ", "info ", "validate ", "checksum", "geloattack store <subcommand> -h"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("store -h lacks %q:\n%s", w, out)
		}
	}
}

// protocol bench runs end to end at toy size and writes its table, CSV and plot; bad flags are
// refused naming the flag.
func TestProtocolBenchCommand(t *testing.T) {
	dir := t.TempDir()
	out, err := cli(t, "protocol", "bench", "-n", "8,16", "-d", "8", "-repeats", "1", "-out", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("protocol bench: %v\n%s", err, out)
	}
	for _, w := range []string{"overhead % (ours)", "overhead % (paper)", "Breakdown at n = 16"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("protocol bench output lacks %q:\n%s", w, out)
		}
	}
	for _, f := range []string{"protocol-bench.md", "protocol-bench.csv", "protocol-bench.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"protocol", "bench", "-repeats", "0"}, `"0" for flag -repeats`},
		{[]string{"protocol", "bench", "-n", "1"}, "Ns"},
		{[]string{"protocol", "bench", "-n", "x"}, `-n: "x" is not an integer`},
		{[]string{"protocol", "equality", "-count", "2"}, `"2" for flag -count`},
		{[]string{"protocol", "equality", "-kappas", "0.5"}, "Kappas"},
		{[]string{"protocol", "nope"}, `unknown subcommand`},
	} {
		out, err := cli(t, c.args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte(c.want)) {
			t.Errorf("%v: %v, want a refusal containing %q:\n%s", c.args, err, c.want, out)
		}
	}
}

// protocol equality on real text: fp32 GELO leaves every nearest neighbour unchanged.
func TestProtocolEqualityCommand(t *testing.T) {
	// The command reads the pinned model and the text corpora from the cache: name whichever is
	// missing (it needs no store).
	model, _ := corpus.DefaultModelDir()
	corpusDir, _ := corpus.DefaultCorpusDir()
	for _, need := range []struct{ what, path, fetch string }{
		{"the MiniLM model", filepath.Join(model, "config.json"), "scripts/fetch-data.sh model"},
		{"the text corpora", corpusDir, "scripts/fetch-data.sh corpus"},
	} {
		if _, err := os.Stat(need.path); err != nil {
			if os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") != "" {
				t.Fatalf("GELOATTACK_REQUIRE_REAL_STORE is set but %s is missing: %v (%s)", need.what, err, need.fetch)
			}
			t.Skipf("needs %s at %s (%s)", need.what, need.path, need.fetch)
		}
	}
	out, err := cli(t, "protocol", "equality", "-count", "6", "-precisions", "fp32", "-kappas", "100", "-layers", "1,2").CombinedOutput()
	if err != nil {
		t.Fatalf("protocol equality: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("| kappa=100 | 1.0000 |")) || !bytes.Contains(out, []byte("| orthogonal | 1.0000 |")) {
		t.Errorf("fp32 GELO changed a nearest neighbour:\n%s", out)
	}
}
