package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/runlock"
)

// A second writer of a run directory is refused naming the holder, and leaves the first run's
// files as they were; once the holder is gone the run goes ahead.
func TestTrainRefusesADirectoryHeldByAnotherWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cfg := tinyRun(t, "device: cpu\n")
	if _, err := Train(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	held, err := runlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps = 8
	_, err = Train(context.Background(), cfg, dir, true, nil)
	if !errors.Is(err, runlock.ErrHeld) || !strings.Contains(err.Error(), "pid ") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Train while the directory is held: %v, want a refusal naming the holder and %s", err, dir)
	}
	after := snapshot(t, dir)
	for name, b := range before {
		if after[name] != b && name != runlock.FileName {
			t.Errorf("%s changed under a refused writer", name)
		}
	}
	held.Release()
	res, err := Train(context.Background(), cfg, dir, true, nil)
	if err != nil || res.Steps != 8 {
		t.Fatalf("resume after the holder released: %v (steps %d)", err, res.Steps)
	}
}

// snapshot maps each file of dir to its contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

// A run refused before it writes anything (here: its store is missing) leaves no directory behind,
// and an existing directory is never removed.
func TestRefusedRunLeavesNoDirectory(t *testing.T) {
	root := t.TempDir()
	cfg := tinyRun(t, "device: cpu\n")
	cfg.Store.Path = filepath.Join(root, "no-such-store")
	dir := filepath.Join(root, "run")
	if _, err := Train(context.Background(), cfg, dir, false, nil); err == nil {
		t.Fatal("training on a missing store succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused run left %s behind (%v)", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Train(context.Background(), cfg, dir, false, nil); err == nil {
		t.Fatal("training on a missing store succeeded")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a directory that existed before was removed: %v", err)
	}
}
