package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/assess"
	"github.com/gelo-research/geloattack/models/hf"
)

func runAssess(t *testing.T, args ...string) error {
	t.Helper()
	return cmdAssess.run(context.Background(), "geloattack assess", args, io.Discard)
}

// `assess -model DIR` with the common flags assesses the default deployment they change: the
// flags override the file, the resolved deployment is written, and the verdicts are reported.
// -shard 0/2 and 1/2 merged give the single run's report.
func TestAssessCommand(t *testing.T) {
	model, texts := tinyDecoder(t, 2, hf.F32)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "deploy.yaml")
	// The file asks for scale 3 and bf16; the flags say scale 1 and float32.
	if err := os.WriteFile(cfg, []byte("batch: {tokens_per_text: 8}\nshields: {scale: 3}\nobserve: {dtype: bf16}\nattacker: {attacks: [decode]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-config", cfg, "-model", model, "-texts", texts, "-prompts", "8", "-shield-scale", "1", "-observe-dtype", "none"}
	one := filepath.Join(dir, "one")
	if err := runAssess(t, append(common, "-out", one)...); err != nil {
		t.Fatal(err)
	}
	dep, err := os.ReadFile(filepath.Join(one, assess.DeploymentFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scale: 1.0\n", "dtype: none\n", "count: 8\n", "tokens_per_text: 8\n", "model: " + model} {
		if !strings.Contains(string(dep), want) {
			t.Errorf("deployment.yaml lacks %q:\n%s", want, dep)
		}
	}
	md, err := os.ReadFile(filepath.Join(one, assess.ReportMD))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("| decode | reads prompts exactly: 8/8 [0.630, 1.000] | 8 claimed (proven from U), 0 wrong claims |")) {
		t.Errorf("the weak default setting is not read back and claimed:\n%s", md)
	}
	var shards []string
	for _, s := range []string{"0/2", "1/2"} {
		out := filepath.Join(dir, "shard"+s[:1])
		if err := runAssess(t, append(common, "-out", out, "-shard", s)...); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, out)
	}
	merged := filepath.Join(dir, "merged")
	if err := runAssess(t, append([]string{"-merge", "-out", merged}, shards...)...); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{assess.ResultsFile, assess.ReportMD, assess.ReportHTML} {
		a, _ := os.ReadFile(filepath.Join(one, f))
		b, _ := os.ReadFile(filepath.Join(merged, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s of the merged shards differs from the single run's", f)
		}
	}
	// -learned completes a file that lists the attack, and a directory that is no train run is
	// refused before anything is written.
	noRun := filepath.Join(dir, "not-a-run")
	if err := os.Mkdir(noRun, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "learned")
	err = runAssess(t, append(common, "-out", out, "-learned", noRun)...)
	if err == nil || !strings.Contains(err.Error(), "-learned "+noRun+": not a train run directory") {
		t.Errorf("-learned of a directory without a checkpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, assess.DeploymentFile)); err == nil {
		t.Errorf("a refused -learned left %s", assess.DeploymentFile)
	}
	// Content recovery from the file's secret template, -victims overriding its count: one row per
	// victim and look-alike, the verdict per template.
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("batch: {tokens_per_text: 8}\nattacker: {attacks: [content]}\n"+
		"secrets: {templates: [{name: pin, pattern: '{x}.', set: pin, candidates: 50}], victims: 5, absent_victims: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cout := filepath.Join(dir, "content")
	if err := runAssess(t, "-config", secrets, "-model", model, "-texts", texts, "-prompts", "8", "-victims", "3", "-out", cout); err != nil {
		t.Fatal(err)
	}
	rows, err := assess.ReadRows(filepath.Join(cout, assess.ResultsFile))
	if err != nil || len(rows) != 3+2 {
		t.Fatalf("content: %d rows (%v), want 3 victims and 2 look-alikes", len(rows), err)
	}
	if md, _ := os.ReadFile(filepath.Join(cout, assess.ReportMD)); !bytes.Contains(md, []byte("| content (pin) | recovers the secret: ")) ||
		!bytes.Contains(md, []byte("| 3 of 3 |")) {
		t.Errorf("content's verdict is not in the report:\n%s", md)
	}
	// The same command again: the directory is refused without -resume, continued with it.
	if err := runAssess(t, append(common, "-out", one)...); err == nil || !strings.Contains(err.Error(), "-resume") {
		t.Errorf("rerun into a finished assessment: %v", err)
	}
	if err := runAssess(t, append(common, "-out", one, "-resume")...); err != nil {
		t.Errorf("-resume of a finished assessment: %v", err)
	}
}

// Mistakes are refused before any work, naming the flag or the file's line.
func TestAssessRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("model: m\nshields:\n  fraction: 0.2\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", bad}, "bad.yaml:3:3"},
		{[]string{"-prompts", "0"}, "-prompts"},
		{[]string{"-victims", "0"}, "-victims"},
		{[]string{"-shield-frac", "2"}, "-shield-frac"},
		{[]string{"-shard", "2/2", "-model", dir}, "shard"},
		{[]string{"-blocks", "0,x", "-model", dir}, "-blocks"},
		{[]string{"-observe-dtype", "fp8", "-model", dir, "-texts", bad}, "observe.dtype"},
		{[]string{"-model", dir, "-texts", bad, "-out", filepath.Join(dir, "o")}, "not a decoder directory"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-merge"}, "name the shards"},
	} {
		err := runAssess(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("assess %v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// -example prints a deployment file that parses to the default deployment.
func TestAssessExample(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = runAssess(t, "-example")
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assess.ParseDeployment("example", out); err != nil || !bytes.Equal(out, []byte(assess.Example)) {
		t.Errorf("-example: %v\n%s", err, out)
	}
}

// The HTML report renders in a real browser with its tables and the frontier's SVG in the DOM.
// It needs Debian's chromium: skipped without it, unless GELOATTACK_REQUIRE_BROWSER=1.
func TestAssessHTMLRendersInChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("GELOATTACK_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GELOATTACK_REQUIRE_BROWSER=1 but %s: %v", chromium, err)
		}
		t.Skipf("no %s (set GELOATTACK_REQUIRE_BROWSER=1 to require it)", chromium)
	}
	model, texts := tinyDecoder(t, 2, hf.F32)
	dir := t.TempDir()
	out := filepath.Join(dir, "a")
	// The default deployment but for a PIN template the tiny tokenizer's single letters fit in.
	cfg := filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(cfg, []byte("secrets: {templates: [{name: pin, pattern: '{x}.', set: pin, candidates: 50}], victims: 2, absent_victims: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runAssess(t, "-config", cfg, "-model", model, "-texts", texts, "-prompts", "4", "-out", out, "-attack-blocks", "0,1"); err != nil {
		t.Fatal(err)
	}
	// CI runs as root, where chromium needs --no-sandbox; a profile of its own in the test's
	// directory (and its crash database, which follows XDG_CONFIG_HOME) keeps it from writing into
	// $HOME and from meeting another run's lock; a deadline turns a hung browser into a failure
	// rather than go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(home, "profile"), "--dump-dom", "file://"+filepath.Join(out, assess.ReportHTML))
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	dom, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("chromium: %v\n%s", err, stderr)
	}
	for _, want := range []string{`<table id="verdicts">`, `<table id="secrets">`, `<table id="settings">`, `<figure id="frontier">`, "<svg", "<circle",
		"<td>decode</td>", "<td>content (pin)</td>"} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("the rendered DOM lacks %s", want)
		}
	}
}
