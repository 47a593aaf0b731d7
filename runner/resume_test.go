package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/train"
)

// A damaged latest checkpoint does not stop -resume: the run falls back to the newest good one,
// says which it skipped and why, and ends with exactly the metrics of an uninterrupted run.
func TestResumeFallsBackToTheNewestGoodCheckpoint(t *testing.T) {
	root := t.TempDir()
	cfg := tinyRun(t, "device: cpu\n")
	cfg.Train.Steps, cfg.Train.KeepCkpts = 8, 3
	ref := filepath.Join(root, "ref")
	if _, err := Train(context.Background(), cfg, ref, false, nil); err != nil {
		t.Fatal(err)
	}

	// The same run, interrupted right after its evaluation at step 4 (checkpoints 2 and 4).
	run := filepath.Join(root, "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := cancelOn{s: "eval @ step 4", cancel: cancel}
	if _, err := Train(ctx, cfg, run, false, &w); !errors.Is(err, train.ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	// Flip the lowest bit of a byte deep in the data section of the newest checkpoint.
	last := filepath.Join(run, "ckpt-4.safetensors")
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-40] ^= 1
	if err := os.WriteFile(last, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := Train(context.Background(), cfg, run, true, &log); err != nil {
		t.Fatalf("resume over a damaged latest checkpoint: %v\n%s", err, log.String())
	}
	out := log.String()
	if !strings.Contains(out, "skipping damaged checkpoint") || !strings.Contains(out, "ckpt-4.safetensors") ||
		!strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "resuming "+filepath.Join(run, "ckpt-2.safetensors")) {
		t.Errorf("resume log does not name the skipped checkpoint, why, and the one used:\n%s", out)
	}
	want, _ := os.ReadFile(filepath.Join(ref, "metrics.jsonl"))
	got, _ := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if !bytes.Equal(want, got) {
		t.Errorf("metrics after the fallback differ from an uninterrupted run\nwant:\n%s\ngot:\n%s", want, got)
	}
}

// -resume reads the checkpoint once: runner.Train loads it to compare configs and hands it to
// train.Train, which restores it without reading the directory again. The checkpoints are removed
// as soon as the run header is printed (after the comparison, before training starts), and the
// run still resumes from step 4 and ends with the metrics of an uninterrupted run.
func TestResumeReadsTheCheckpointOnce(t *testing.T) {
	root := t.TempDir()
	cfg := tinyRun(t, "device: cpu\n")
	cfg.Train.Steps, cfg.Train.KeepCkpts = 8, 3
	ref := filepath.Join(root, "ref")
	if _, err := Train(context.Background(), cfg, ref, false, nil); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(root, "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Train(ctx, cfg, run, false, &cancelOn{s: "eval @ step 4", cancel: cancel}); !errors.Is(err, train.ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	log := removeOn{s: "run " + run + ": ", remove: func() error {
		names, err := filepath.Glob(filepath.Join(run, "ckpt-*.safetensors"))
		if err != nil || len(names) == 0 {
			return fmt.Errorf("no checkpoint to remove in %s (%v)", run, err)
		}
		for _, n := range append(names, filepath.Join(run, "latest")) {
			if err := os.Remove(n); err != nil {
				return err
			}
		}
		return nil
	}}
	if _, err := Train(context.Background(), cfg, run, true, &log); err != nil {
		t.Fatalf("resume with the checkpoints gone after the config check: %v\n%s", err, log.buf.String())
	}
	if log.err != nil || !log.done {
		t.Fatalf("removing the checkpoints: done %v, %v\n%s", log.done, log.err, log.buf.String())
	}
	if want := "resuming " + filepath.Join(run, "ckpt-4.safetensors") + " at step 4"; !strings.Contains(log.buf.String(), want) {
		t.Errorf("resume log lacks %q:\n%s", want, log.buf.String())
	}
	want, _ := os.ReadFile(filepath.Join(ref, "metrics.jsonl"))
	got, _ := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if !bytes.Equal(want, got) {
		t.Errorf("metrics of the resumed run differ from an uninterrupted run\nwant:\n%s\ngot:\n%s", want, got)
	}
}

// removeOn runs remove once, when the progress output first contains s.
type removeOn struct {
	buf    bytes.Buffer
	s      string
	remove func() error
	done   bool
	err    error
}

func (r *removeOn) Write(p []byte) (int, error) {
	r.buf.Write(p)
	if !r.done && strings.Contains(r.buf.String(), r.s) {
		r.done, r.err = true, r.remove()
	}
	return len(p), nil
}

// cancelOn cancels a context once the progress output contains s.
type cancelOn struct {
	buf    bytes.Buffer
	s      string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.s) {
		c.cancel()
	}
	return len(p), nil
}
