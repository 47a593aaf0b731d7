package assess

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run assesses d into a new directory and returns it.
func run(t *testing.T, d Deployment, opt Options) (string, *Outcome) {
	t.Helper()
	if opt.Out == "" {
		opt.Out = filepath.Join(t.TempDir(), "a")
	}
	res, err := Run(context.Background(), d, opt)
	if err != nil {
		t.Fatal(err)
	}
	return opt.Out, res
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Known answer, the weak setting: 10% gaussian shields at scale 1, fp32, below full rank. Prompt
// decoding reads every prompt and every claim is right; presence tells every prompt from its decoy.
func TestWeakSettingReadsEveryPrompt(t *testing.T) {
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 8)
	dir, res := run(t, d, Options{})
	t.Logf("%s", readFile(t, filepath.Join(dir, ReportMD)))
	for _, a := range res.Summary.Attacks {
		c := a.Cells[0]
		if a.NotApplicable != "" {
			t.Errorf("%s does not apply: %s", a.Name, a.NotApplicable)
			continue
		}
		if c.Prompts != 8 || c.Successes != 8 || c.Wrong != 0 {
			t.Errorf("%s: %d/%d successes, %d wrong claims; want 8/8, none wrong", a.Name, c.Successes, c.Prompts, c.Wrong)
		}
		if v := c.Verdict(a.Success); !strings.HasPrefix(v, a.Success+": 8/8") {
			t.Errorf("%s: verdict %q", a.Name, v)
		}
	}
	if c := res.Summary.Attacks[0].Cells[0]; c.Claims == 0 {
		t.Errorf("decode claimed nothing in the weak setting")
	}
}

// Known answer, a strong setting: 128 shield rows of scale 10 on width 64 (twice past full rank),
// blocks 0 and 1 scored: prompt decoding reads no prompt and claims nothing.
func TestStrongSettingStopsDecoding(t *testing.T) {
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 8)
	d.Shields.Rows, d.Shields.Scale = 128, 10
	d.Attacker.Attacks = []string{"decode"}
	dir, res := run(t, d, Options{})
	c := res.Summary.Attacks[0].Cells[0]
	if c.Prompts != 8 || c.Successes != 0 || c.Claims != 0 || c.Wrong != 0 {
		t.Errorf("decode at 128 rows of scale 10: %d/%d read, %d claims, %d wrong; want 0/8 and nothing claimed",
			c.Successes, c.Prompts, c.Claims, c.Wrong)
	}
	md := readFile(t, filepath.Join(dir, ReportMD))
	if !bytes.Contains(md, []byte("no success at this budget: 0/8 [0.000, 0.370]")) {
		t.Errorf("report.md has no verdict of no success:\n%s", md)
	}
	for _, l := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(l, "| ") && strings.Contains(strings.ToLower(l), "safe") {
			t.Errorf("a table of report.md calls something safe: %s", l)
		}
	}
}

// A cancelled run keeps what it did and says how to continue.
func TestCancelKeepsWhatIsDone(t *testing.T) {
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 8)
	ctx, cancel := context.WithCancel(context.Background())
	out := filepath.Join(t.TempDir(), "a")
	_, err := Run(ctx, d, Options{Out: out, AfterBatch: func(done, total int) {
		if done == 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "-resume") {
		t.Fatalf("cancelled run: %v", err)
	}
	rows, err := ReadRows(filepath.Join(out, ResultsFile))
	if err != nil || len(rows) != 4 {
		t.Fatalf("cancelled after one batch: %d rows (%v), want 4", len(rows), err)
	}
	if _, err := os.Stat(filepath.Join(out, ReportMD)); err != nil {
		t.Errorf("no report for what was done: %v", err)
	}
}
