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

// gridDeployment is a small grid on the tiny decoder: 12 prompts (3 batches) at the deployment,
// at 64 shield rows (full rank on width 64) of scales 1 and 10, at cond(A) 100 and with U
// observed in bf16; the battery is decode, presence, content recovery (a PIN template that fits
// the 8 tokens, "1234." being BOS and 6 tokens; 100 PINs, 2 victims and 2 look-alikes) and the
// learned attack (a checkpoint of a few steps on a store of block 1).
func gridDeployment(t *testing.T) Deployment {
	t.Helper()
	model, texts := tinyDecoder(t)
	d := tinyDeployment(model, texts, 12)
	d.Grid = Grid{Enabled: true, ShieldRows: []int{64}, ShieldScales: []float64{1, 10}, Kappas: []float64{100},
		ObserveDTypes: []string{DTypeBF16}}
	d.Secrets = Secrets{Templates: []SecretTemplate{{Name: "pin", Pattern: "{x}.", Set: SetPIN, Candidates: 100}}, Victims: 2, AbsentVictims: 2}
	d.Attacker.Learned = trainRun(t, extractStore(t, d, 1))
	return d
}

// The files of an assessment that must be byte-equal between runs of it.
var reproduced = []string{ResultsFile, DeploymentFile, ReportMD, ReportHTML, FrontierSVG}

func sameFiles(t *testing.T, want, got string) {
	t.Helper()
	for _, f := range reproduced {
		a, b := readFile(t, filepath.Join(want, f)), readFile(t, filepath.Join(got, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the uninterrupted run's (%d and %d bytes): %s", f, len(a), len(b), firstDiff(a, b))
		}
	}
}

// A run cancelled half-way (through its context, as Ctrl-C does) and resumed writes the bytes of
// an uninterrupted run: results.jsonl, deployment.yaml and the reports. A cut last line (a kill
// during an append) is removed on resume, and gives the same bytes too.
func TestResumeGivesTheSameBytes(t *testing.T) {
	d := gridDeployment(t)
	whole, res := run(t, d, Options{})
	total := res.Total
	if total != 5*(3*3+4) {
		t.Fatalf("plan of %d batches, want 65 (5 settings; 3 attacks of 3 batches, content's 4 victims)", total)
	}
	half := filepath.Join(t.TempDir(), "half")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Run(ctx, d, Options{Out: half, AfterBatch: func(done, _ int) {
		if done == total/2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	rows, _ := ReadRows(filepath.Join(half, ResultsFile))
	if len(rows) == 0 || len(rows) >= res.Summary.Rows {
		t.Fatalf("cancelled run kept %d of %d rows", len(rows), res.Summary.Rows)
	}
	// A kill in the middle of the next append: half a line at the end.
	f, err := os.OpenFile(filepath.Join(half, ResultsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"setting":{"name":"deploym`)
	f.Close()
	out, err := Run(context.Background(), d, Options{Out: half, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Skipped != total/2 {
		t.Errorf("resume skipped %d batches, want %d", out.Skipped, total/2)
	}
	sameFiles(t, whole, half)
	// Resuming a finished assessment runs nothing and changes nothing.
	again, err := Run(context.Background(), d, Options{Out: half, Resume: true})
	if err != nil || again.Skipped != total {
		t.Fatalf("resume of a finished assessment: skipped %d of %d (%v)", again.Skipped, total, err)
	}
	sameFiles(t, whole, half)
}

// Resume refuses another deployment, and a new run refuses a directory that holds one.
func TestResumeRefusesAnotherAssessment(t *testing.T) {
	d := gridDeployment(t)
	d.Grid.Enabled = false
	d.Attacker.Attacks = []string{"decode"}
	dir, _ := run(t, d, Options{})
	other := d
	other.Shields.Scale = 3
	if _, err := Run(context.Background(), other, Options{Out: dir, Resume: true}); err == nil || !strings.Contains(err.Error(), "deployment.yaml") {
		t.Errorf("resume with another deployment: %v", err)
	}
	if _, err := Run(context.Background(), d, Options{Out: dir}); err == nil || !strings.Contains(err.Error(), "-resume") {
		t.Errorf("a new run into an assessment directory: %v", err)
	}
	if _, err := Run(context.Background(), d, Options{Out: dir, Resume: true, Shard: Shard{Index: 1, Count: 2}}); err == nil || !strings.Contains(err.Error(), "shard") {
		t.Errorf("resume as another shard: %v", err)
	}
}

// Two shards merged give the bytes of one run: results.jsonl and every report.
func TestShardsMergeToOneRun(t *testing.T) {
	d := gridDeployment(t)
	whole, _ := run(t, d, Options{})
	var dirs []string
	for i := range 2 {
		dir, res := run(t, d, Options{Shard: Shard{Index: i, Count: 2}})
		// Per setting: batches 0 and 2 of three attacks and content's victims 0 and 2, then batch 1
		// of three attacks and content's victims 1 and 3.
		if want := []int{5 * (6 + 2), 5 * (3 + 2)}[i]; res.Total != want {
			t.Errorf("shard %d/2: %d batches, want %d", i, res.Total, want)
		}
		dirs = append(dirs, dir)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	// The shards in either order.
	if _, err := Merge(merged, []string{dirs[1], dirs[0]}, nil, false); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, whole, merged)
	// One shard alone is not the assessment.
	if _, err := Merge(filepath.Join(t.TempDir(), "m"), dirs[:1], nil, false); err == nil || !strings.Contains(err.Error(), "in no shard") {
		t.Errorf("merge of one shard of two: %v", err)
	}
	// Shards of another deployment are refused.
	other := d
	other.Seed = 9
	odir, _ := run(t, other, Options{Shard: Shard{Index: 1, Count: 2}})
	if _, err := Merge(filepath.Join(t.TempDir(), "m2"), []string{dirs[0], odir}, nil, false); err == nil || !strings.Contains(err.Error(), "different assessments") {
		t.Errorf("merge across deployments: %v", err)
	}
}

// What is not an assessment's is refused before any work: a link where results.jsonl goes, a
// damaged line in the middle of results.jsonl (named with its line).
func TestResumeRefusesHostileFiles(t *testing.T) {
	d := gridDeployment(t)
	d.Grid.Enabled = false
	d.Attacker.Attacks = []string{"decode"}
	dir, _ := run(t, d, Options{})
	res := filepath.Join(dir, ResultsFile)
	good := readFile(t, res)
	lines := strings.SplitAfter(string(good), "\n")
	os.WriteFile(res, []byte(lines[0]+"{not json}\n"+strings.Join(lines[1:], "")), 0o644)
	if _, err := Run(context.Background(), d, Options{Out: dir, Resume: true}); err == nil || !strings.Contains(err.Error(), "results.jsonl:2") {
		t.Errorf("a damaged line: %v", err)
	}
	os.Remove(res)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, good, 0o644)
	if err := os.Symlink(target, res); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), d, Options{Out: dir, Resume: true}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("results.jsonl a link: %v", err)
	}
	if b := readFile(t, target); !bytes.Equal(b, good) {
		t.Errorf("the link's target was written")
	}
}
