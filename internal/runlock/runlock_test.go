package runlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
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

// A lock held by another live process is refused; once that process is killed it is free. The
// holder is this test binary re-run as a child (holdLockEnv) that takes the flock itself and has no
// children of its own: flock(1) forks its command while holding the lock, so killing it left the
// lock held by a child that had not yet closed the descriptor, one run in seven on a busy machine.
// Here the child says "locked" only once it holds the lock, and cmd.Wait returns only after the
// kernel has closed its descriptors, so nothing below waits on time.
func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte("pid 4242 on test since now (holder)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldLockHelper$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("holder process: read %q, %v; want \"locked\"", line, err)
	}
	if h := Holder(dir); !strings.Contains(h, "pid 4242") {
		t.Errorf("Holder while another process holds the lock = %q, want pid 4242", h)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("Acquire while another process holds the lock: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
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

// holdLockEnv names the lock file that TestHoldLockHelper locks when the test binary runs as
// TestLockHeldByAnotherProcess's child.
const holdLockEnv = "RUNLOCK_TEST_HOLD"

// TestHoldLockHelper is the child of TestLockHeldByAnotherProcess: it flocks the file named by
// holdLockEnv without recording itself (the file keeps the parent's fake holder), says "locked" and
// waits to be killed. Run directly, it does nothing.
func TestHoldLockHelper(t *testing.T) {
	path := os.Getenv(holdLockEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	time.Sleep(time.Hour)
	os.Exit(0)
}

// A lock file planted as a symbolic link (to a file outside the run directory), a FIFO or a
// directory is refused naming its path; the link's target keeps its content (before, Acquire
// truncated it and reported "took over the stale lock of <its first line>").
func TestHostileLockFileIsRefused(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo", "dir", "devzero"} {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "run")
			os.Mkdir(dir, 0o755)
			victim := filepath.Join(root, "victim.txt")
			os.WriteFile(victim, []byte("precious\n"), 0o644)
			path := filepath.Join(dir, FileName)
			safefiletest.Plant(t, kind, path, victim)
			l, err := Acquire(dir)
			if err == nil {
				t.Fatalf("Acquire accepted a %s lock file (stale %q)", kind, l.Stale)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("refusal %q does not name %s", err, path)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Errorf("victim is now %q", b)
			}
		})
	}
}
