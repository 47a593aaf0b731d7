package runner

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/runlock"
)

// copyFile copies a checkpoint into another run directory, as a user (or an attacker) might.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// resumeAsCLI resumes dir the way `train -resume -out dir` does without -config: with the config
// its newest checkpoint records.
func resumeAsCLI(t *testing.T, dir string) (string, error) {
	t.Helper()
	cfg, err := ResumeConfig(dir)
	if err != nil {
		return "", err
	}
	var log strings.Builder
	_, err = Train(context.Background(), cfg, dir, true, &log)
	return log.String(), err
}

// A checkpoint of another model size copied into a run directory is refused by -resume, naming
// both shapes; one of the same size but another config (another seed of the sampler, say) is
// refused naming both config hashes. Before, the foreign checkpoint's config was taken as the
// run's: the run continued as the other model and exited 0.
func TestResumeRefusesACheckpointOfAnotherRun(t *testing.T) {
	root := t.TempDir()
	base := tinyRun(t, "device: cpu\n")
	run := filepath.Join(root, "run")
	if _, err := Train(context.Background(), base, run, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *config.Run)
		want []string
	}{
		{"bigger-model", func(c *config.Run) { c.Model.Hidden = 32 }, []string{"another model", "shape"}},
		{"other-config", func(c *config.Run) { c.Sampler.ShieldFrac = gelo.Fixed(0.5) }, []string{"another run", "config hash", "sha256:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := filepath.Join(root, tc.name)
			cfg := tinyRun(t, "device: cpu\n")
			tc.edit(&cfg)
			cfg.Train.Steps = 6
			if _, err := Train(context.Background(), cfg, other, false, io.Discard); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(root, tc.name+"-victim")
			copyDir(t, run, victim)
			copyFile(t, filepath.Join(other, "ckpt-6.safetensors"), filepath.Join(victim, "ckpt-6.safetensors"))
			copyFile(t, filepath.Join(other, "latest"), filepath.Join(victim, "latest"))
			metrics, _ := os.ReadFile(filepath.Join(victim, "metrics.jsonl"))
			conf, _ := os.ReadFile(filepath.Join(victim, "config.yaml"))
			log, err := resumeAsCLI(t, victim)
			if err == nil {
				t.Fatalf("resumed a checkpoint of another run:\n%s", log)
			}
			for _, w := range append(tc.want, filepath.Join(victim, "ckpt-6.safetensors"), IdentityFile) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not name %q", err, w)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(victim, "metrics.jsonl")); string(b) != string(metrics) {
				t.Errorf("metrics.jsonl changed")
			}
			if b, _ := os.ReadFile(filepath.Join(victim, "config.yaml")); string(b) != string(conf) {
				t.Errorf("config.yaml rewritten")
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint claiming a step beyond its own config's train.steps (2^63-1, or just steps+1) is
// refused naming the step, instead of ending the run as "already complete".
func TestResumeRefusesAbsurdSteps(t *testing.T) {
	root := t.TempDir()
	cfg := tinyRun(t, "device: cpu\n")
	run := filepath.Join(root, "run")
	if _, err := Train(context.Background(), cfg, run, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoints.LoadLatest(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{math.MaxInt64, int64(cfg.Train.Steps) + 1} {
		dir := filepath.Join(root, "forged", strings.ReplaceAll(CheckpointStepName(step), ".", "_"))
		copyDir(t, run, dir)
		st := ck.State
		st.Step = step
		if err := checkpoints.SaveCheckpoint(dir, step, ck.Weights, st, ck.Metadata); err != nil {
			t.Fatal(err)
		}
		log, err := resumeAsCLI(t, dir)
		if err == nil || !strings.Contains(err.Error(), "claims step") || !strings.Contains(err.Error(), checkpoints.CheckpointName(step)) {
			t.Fatalf("step %d: %v\n%s", step, err, log)
		}
	}
}

// CheckpointStepName names a test directory by step.
func CheckpointStepName(step int64) string { return checkpoints.CheckpointName(step) }

// `train -resume` on a run whose lock another writer holds, before that writer has saved any
// checkpoint, names the holder (before: "no checkpoint to resume from").
func TestResumeConfigNamesTheHolderFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := runlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	_, err = ResumeConfig(dir)
	if err == nil || !strings.Contains(err.Error(), "in use by pid") || strings.Contains(err.Error(), "no checkpoint") {
		t.Fatalf("ResumeConfig of a held run without checkpoints: %v", err)
	}
}
