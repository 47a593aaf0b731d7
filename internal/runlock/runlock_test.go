package runlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSecondAcquireIsRefusedNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stale != "" {
		t.Errorf("fresh lock reports a stale holder: %q", l.Stale)
	}
	_, err = Acquire(dir)
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	pid := "pid " + strconv.Itoa(os.Getpid())
	if !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), dir) {
		t.Errorf("refusal %q does not name the holder (%s) and the directory", err, pid)
	}
	if h := Holder(dir); !strings.Contains(h, pid) {
		t.Errorf("Holder = %q, want it to name %s", h, pid)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if h := Holder(dir); h != "" {
		t.Errorf("Holder after release = %q, want none", h)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if l2.Stale != "" {
		t.Errorf("a released lock is reported stale: %q", l2.Stale)
	}
	l2.Release()
	if err := l2.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
}

// A lock file left by a process that died holding it (kill -9) is taken over, saying whose it was.
func TestStaleLockOfDeadProcessIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	// What a killed holder leaves: its record in the file, and no flock (the kernel dropped it).
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("pid 999999 on elsewhere since 2026-01-01T00:00:00Z (geloattack train)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire over a stale lock file: %v", err)
	}
	defer l.Release()
	if !strings.Contains(l.Stale, "pid 999999") {
		t.Errorf("Stale = %q, want it to name the dead holder", l.Stale)
	}
}

// A lock held by another live process is refused; once that process is killed it is free. flock(1)
// -o holds it in the flock process alone, so killing that process releases it.
func TestLockHeldByAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte("pid 4242 on test since now (holder)\n"), 0o644)
	cmd := exec.Command(flock, "-o", "-x", path, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the child holds it.
	for i := 0; i < 500 && Holder(dir) == ""; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("Acquire while another process holds the lock: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer l.Release()
	if !strings.Contains(l.Stale, "pid 4242") {
		t.Errorf("Stale = %q, want the killed holder named", l.Stale)
	}
}
