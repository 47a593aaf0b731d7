package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/sweep/report"
)

// tinySweep has 3 cells (so two shards get 2 and 1) of tiny runs.
const tinySweep = `name: tiny-sweep
base:
  seed: 7
  store:
    synth: {texts: 200, min_tokens: 8, max_tokens: 24, d: 32, e: 16}
  sampler:
    positives: [2, 3]
    tokens_per_text: 8
    shield_frac: 0.25
  model: {task: retrieval, hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}
  train: {steps: 20, batch_size: 4, warmup_steps: 5, log_every: 5, eval_every: 10, eval_batches: 2, ckpt_every: 10, workers: 1}
axes:
  sampler.shield_kind: [gaussian, manifold]
cells:
  - {sampler.shield_scale: 0.5}
  - {sampler.shield_scale: 8}
`

func writeSweep(t *testing.T, dir, src string) string {
	t.Helper()
	p := filepath.Join(dir, "tiny-sweep.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two shards run as two concurrent processes give a report byte-identical to one unsharded run.
func TestShardedSweepReportIdenticalToUnsharded(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 8 tiny models")
	}
	dir := t.TempDir()
	cfg := writeSweep(t, dir, tinySweep+"  - {sampler.shield_scale: 2}\n")
	one, two := filepath.Join(dir, "one"), filepath.Join(dir, "two")

	if out, err := cli(t, "sweep", "-config", cfg, "-out", one).CombinedOutput(); err != nil {
		t.Fatalf("unsharded sweep: %v\n%s", err, out)
	}
	var outs [2]bytes.Buffer
	a := cli(t, "sweep", "-config", cfg, "-out", two, "-shard", "0/2")
	// The second shard takes its index from a Kubernetes Indexed Job's environment.
	b := cli(t, "sweep", "-config", cfg, "-out", two, "-shards", "2")
	b.Env = append(b.Env, "JOB_COMPLETION_INDEX=1")
	a.Stdout, a.Stderr = &outs[0], &outs[0]
	b.Stdout, b.Stderr = &outs[1], &outs[1]
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	errA, errB := a.Wait(), b.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("shards: %v, %v\n%s\n%s", errA, errB, outs[0].String(), outs[1].String())
	}
	if !strings.Contains(outs[1].String(), "shard 1/2 from the Kubernetes Indexed Job environment") ||
		!strings.Contains(outs[0].String(), "6 cells, 3 in this shard") {
		t.Fatalf("shard logs:\n%s\n%s", outs[0].String(), outs[1].String())
	}
	for _, d := range []string{one, two} {
		if out, err := cli(t, "report", "-q", d).CombinedOutput(); err != nil {
			t.Fatalf("report %s: %v\n%s", d, err, out)
		}
	}
	for _, f := range []string{report.MarkdownFile, report.CSVFile, report.PlotFile("retrieval")} {
		x, y := mustRead(t, filepath.Join(one, f)), mustRead(t, filepath.Join(two, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between the unsharded and the sharded sweep:\n%s\nvs\n%s", f, x, y)
		}
		if len(x) == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	md := string(mustRead(t, filepath.Join(one, report.MarkdownFile)))
	if !strings.Contains(md, "6 cells: 6 finished, 0 not finished") || strings.Count(md, "\n| gaussian |")+strings.Count(md, "\n| manifold |") != 6 {
		t.Fatalf("report.md:\n%s", md)
	}

	// Running again skips every cell.
	out, err := cli(t, "sweep", "-config", cfg, "-out", one).CombinedOutput()
	if err != nil || strings.Count(string(out), "finished before, skipped") != 6 || strings.Contains(string(out), "starting") {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
}

func TestSweepCLIErrors(t *testing.T) {
	dir := t.TempDir()
	if out, err := cli(t, "sweep").CombinedOutput(); err == nil || !strings.Contains(string(out), "-config is required") {
		t.Fatalf("no -config: %v\n%s", err, out)
	}
	bad := writeSweep(t, dir, tinySweep+"  - {sampler.shield_scale: -2}\n")
	out, err := cli(t, "sweep", "-config", bad, "-out", filepath.Join(dir, "x")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tiny-sweep.yaml:17:28: sampler.shield_scale") {
		t.Fatalf("bad axis value: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("an invalid sweep created its output directory")
	}
	good := writeSweep(t, dir, tinySweep)
	if out, err := cli(t, "sweep", "-config", good, "-shard", "2/2").CombinedOutput(); err == nil || !strings.Contains(string(out), "0 <= i < N") {
		t.Fatalf("bad shard: %v\n%s", err, out)
	}
	out, err = cli(t, "sweep", "-config", good, "-out", filepath.Join(dir, "y"), "-shard", "1/2", "-list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "*   2  shard 1  shield_kind=gaussian,shield_scale=8") ||
		!strings.Contains(string(out), "    1  shard 0  shield_kind=gaussian,shield_scale=0.5") {
		t.Fatalf("-list: %v\n%s", err, out)
	}
	if out, err := cli(t, "report", filepath.Join(dir, "nothing")).CombinedOutput(); err == nil {
		t.Fatalf("report of a missing directory succeeded:\n%s", out)
	}
}

// -cells picks cells by label or name: it lists only them with -list, runs only them (the report
// names the others as not finished), refuses unknown names with the valid ones, and refuses a
// shard beside it, given by flag or by a job array's environment.
func TestSweepCellsFlag(t *testing.T) {
	dir := t.TempDir()
	cfg := writeSweep(t, dir, strings.Replace(tinySweep, "axes:\n  sampler.shield_kind: [gaussian, manifold]\n", "", 1)+
		"  - {label: R7, sampler.shield_scale: 2, paper: {train: 0.3641, val: 0.3737}}\n")
	out := filepath.Join(dir, "out")
	refused := func(want string, env []string, args ...string) {
		t.Helper()
		c := cli(t, append([]string{"sweep", "-config", cfg, "-out", out}, args...)...)
		c.Env = append(c.Env, env...)
		o, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(o), want) {
			t.Errorf("%v %v: %v, want an error with %q:\n%s", args, env, err, want, o)
		}
	}
	refused(`has no cell "R8"; its cells are shield_scale=0.5, shield_scale=8, R7 (see -list)`, nil, "-cells", "R7,R8")
	refused("an empty name", nil, "-cells", "")
	refused("-cells and -shard/-shards both select cells", nil, "-cells", "R7", "-shard", "0/2")
	refused("-cells and -shard/-shards both select cells", nil, "-cells", "R7", "-shards", "2")
	refused("-cells inside a job array", []string{"SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_COUNT=2"}, "-cells", "R7")
	refused("-cells inside a job array", []string{"JOB_COMPLETION_INDEX=1"}, "-cells", "R7")
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused -cells created the sweep directory")
	}

	o, err := cli(t, "sweep", "-config", cfg, "-out", out, "-cells", "R7,shield_scale=8", "-list").CombinedOutput()
	if err != nil || !strings.Contains(string(o), "3 cells in "+out+", 2 chosen by -cells") ||
		!strings.Contains(string(o), "*   2  shard 0  shield_scale=8 ") ||
		!strings.Contains(string(o), "*   3  shard 0  R7 shield_scale=2 (paper train 0.3641, val 0.3737)") ||
		strings.Contains(string(o), "shield_scale=0.5") {
		t.Fatalf("-cells -list: %v\n%s", err, o)
	}
	if testing.Short() {
		return
	}
	o, err = cli(t, "sweep", "-config", cfg, "-out", out, "-cells", "R7").CombinedOutput()
	if err != nil || !strings.Contains(string(o), "3 cells, 1 chosen") || !strings.Contains(string(o), "cell 3/3 (1 of 1 chosen) R7: started and finished") ||
		!strings.Contains(string(o), "1 chosen cells done in") {
		t.Fatalf("-cells R7: %v\n%s", err, o)
	}
	if o, err := cli(t, "report", "-q", out).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, o)
	}
	md := string(mustRead(t, filepath.Join(out, report.MarkdownFile)))
	if !strings.Contains(md, "3 cells: 1 finished, 2 not finished") {
		t.Fatalf("report.md:\n%s", md)
	}
	// -paper compares the cells that carry the paper's figures with them.
	o, err = cli(t, "report", "-q", "-paper", out).Output()
	if err != nil || !strings.Contains(string(o), "## retrieval: against the paper") || !strings.Contains(string(o), "| R7 | ") ||
		!strings.Contains(string(o), "(paper − 0.0625)") || strings.Contains(string(o), "# Sweep") {
		t.Fatalf("report -paper: %v\n%s", err, o)
	}
}

// -seed reseeds every cell (its sampler too, where that followed the seed) and -store moves every
// cell to another store: the cell's recorded config says so, and a missing store is named.
func TestSweepSeedAndStoreFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a cell")
	}
	dir := t.TempDir()
	cfg := writeSweep(t, dir, strings.Replace(tinySweep, "axes:\n  sampler.shield_kind: [gaussian, manifold]\n", "", 1)+
		"  - {label: R7, sampler.shield_scale: 2}\n")
	out := filepath.Join(dir, "s9")
	if o, err := cli(t, "sweep", "-config", cfg, "-out", out, "-cells", "R7", "-seed", "9", "-steps", "7").CombinedOutput(); err != nil {
		t.Fatalf("-seed 9 -steps 7: %v\n%s", err, o)
	}
	got := string(mustRead(t, filepath.Join(out, "R7", "config.yaml")))
	if !strings.Contains(got, "\nseed: 9\n") || !strings.Contains(got, "  seed: 9\n") {
		t.Errorf("-seed 9: the cell's config.yaml does not carry seed 9 for the run and its sampler:\n%s", got)
	}
	if !strings.Contains(got, "  steps: 7\n") {
		t.Errorf("-steps 7: the cell's config.yaml does not carry 7 steps:\n%s", got)
	}
	if last := lastMetricsStep(t, filepath.Join(out, "R7")); last != 7 {
		t.Errorf("-steps 7: the cell's last logged step is %d", last)
	}
	missing := filepath.Join(dir, "no-such-store")
	o, err := cli(t, "sweep", "-config", cfg, "-out", filepath.Join(dir, "st"), "-cells", "R7", "-store", missing).CombinedOutput()
	if err == nil || !strings.Contains(string(o), missing) {
		t.Errorf("-store %s: %v, want a failure naming the store:\n%s", missing, err, o)
	}
	if o, err := cli(t, "sweep", "-config", cfg, "-seed", "x", "-list").CombinedOutput(); err == nil || !strings.Contains(string(o), `-seed "x"`) {
		t.Errorf("-seed x: %v\n%s", err, o)
	}
	if o, err := cli(t, "sweep", "-config", cfg, "-steps", "0", "-list").CombinedOutput(); err == nil || !strings.Contains(string(o), "-steps") {
		t.Errorf("-steps 0: %v\n%s", err, o)
	}
}

// lastMetricsStep is the largest step a run directory's metrics.jsonl logged.
func lastMetricsStep(t *testing.T, run string) int {
	t.Helper()
	last := -1
	sc := bufio.NewScanner(bytes.NewReader(mustRead(t, filepath.Join(run, "metrics.jsonl"))))
	for sc.Scan() {
		var rec struct {
			Step int `json:"step"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: metrics line %q: %v", run, sc.Text(), err)
		}
		last = max(last, rec.Step)
	}
	return last
}
