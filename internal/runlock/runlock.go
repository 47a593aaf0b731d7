// Package runlock keeps two processes from writing one run directory at once. A lock is an
// advisory flock(2) on <dir>/.lock, a file that also records the holder (pid, host, start time,
// command line) so that a refused writer can say who holds it. The kernel drops a flock when its
// process dies, however it dies, so a lock left by a killed run is never in the way: the next
// writer takes it over and says whose it was.
package runlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// FileName is the lock file inside a locked directory.
const FileName = ".lock"

// ErrHeld reports a directory locked by another live process.
var ErrHeld = errors.New("in use by another process")

// HeldError is the refusal of a directory that another process holds; it wraps ErrHeld.
type HeldError struct {
	// Dir is the locked directory.
	Dir string
	// Holder is what the lock file says of the process that holds it ("" if unreadable).
	Holder string
}

// Error names the directory and the holder.
func (e *HeldError) Error() string {
	h := e.Holder
	if h == "" {
		h = "a process that did not record itself"
	}
	return fmt.Sprintf("%s is in use by %s; wait for it to finish or stop it (a second writer would interleave its metrics and checkpoints)", e.Dir, h)
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Lock is a held lock; Release gives it back.
type Lock struct {
	f    *os.File
	path string
	// Stale describes the holder of a lock file that this process took over (its process had
	// ended without removing it), or "" when there was none. The caller prints it.
	Stale string
}

// Acquire locks dir (creating it if needed) for this process, without waiting. When another live
// process holds it the error is a *HeldError naming that process.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// A symbolic link or FIFO planted as the lock file is refused before anything is written:
	// truncating through a link would empty a file outside the run directory.
	f, err := safefile.OpenLock(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		// The holder writes its record just after taking the lock: give it a moment, so the
		// refusal can name it.
		for i := 0; holder == "" && i < 40 && errors.Is(err, syscall.EWOULDBLOCK); i++ {
			time.Sleep(5 * time.Millisecond)
			holder = readHolder(f)
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, Holder: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f, path: path}
	// A lock file with content whose flock we could take belonged to a process that has ended
	// (killed, crashed, or a machine restart) without removing it. Stale is set only once this
	// process has recorded itself, so a refusal never claims a takeover.
	prev := readHolder(f)
	if err := l.record(); err != nil {
		l.Release()
		return nil, err
	}
	if prev != "" {
		l.Stale = fmt.Sprintf("took over the stale lock of %s (that process has ended)", prev)
	}
	return l, nil
}

// record writes this process into the lock file.
func (l *Lock) record() error {
	host, _ := os.Hostname()
	s := fmt.Sprintf("pid %d on %s since %s (%s)\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339),
		strings.Join(os.Args, " "))
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("lock %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt([]byte(s), 0); err != nil {
		return fmt.Errorf("lock %s: %w", l.path, err)
	}
	return nil
}

// Release empties the lock file and drops the lock. The file is kept: removing it would let a
// third process lock a new file while a second still waits on the old one. Safe on nil and twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Truncate(0)
	if cerr := l.f.Close(); err == nil {
		err = cerr // closing drops the flock
	}
	l.f = nil
	return err
}

// Holder reads who holds dir's lock: the recorded holder when a live process holds it, "" when
// nobody does. It takes no lock.
func Holder(dir string) string {
	path := filepath.Join(dir, FileName)
	if _, err := os.Lstat(path); err != nil {
		return ""
	}
	f, err := safefile.OpenLock(path, 0o644)
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return ""
	}
	return readHolder(f)
}

// readHolder is the first line of the lock file, bounded, with control bytes dropped.
func readHolder(f *os.File) string {
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0)
	s, _, _ := strings.Cut(string(buf[:n]), "\n")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
