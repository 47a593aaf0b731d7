package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// FileMode is the permission of every file this package creates: os.CreateTemp makes 0600 files,
// which would hide results and checkpoints from the other users of a shared directory.
const FileMode = 0o644

// AtomicFile is a file being written under a temporary name in its target's directory; Commit
// renames it into place, Abort removes it. Until Commit nothing at the target changes.
type AtomicFile struct {
	files     *Files
	f         *os.File
	path, dir string
	done      bool
}

// TempPattern is the os.CreateTemp pattern of the temporary file that replaces base: hidden, so
// listings and globs of the directory's files never see it, and recognisable, so that a writer
// can clear the leftovers of a killed process.
func TempPattern(base string) string { return "." + base + ".tmp-*" }

// CreateAtomic starts writing path atomically (see WriteFileAtomic), after the checks of
// CheckOutput. The caller writes, then calls Commit, or Abort on any error (Abort after Commit
// does nothing, so it can be deferred).
func (f *Files) CreateAtomic(path string) (*AtomicFile, error) {
	if err := f.CheckOutput(path); err != nil {
		return nil, fmt.Errorf("write %w", err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, TempPattern(base))
	if err != nil {
		return nil, fmt.Errorf("write %s: create temporary file: %w", path, err)
	}
	return &AtomicFile{files: f, f: tmp, path: path, dir: dir}, nil
}

// Write writes to the temporary file.
func (a *AtomicFile) Write(p []byte) (int, error) { return a.f.Write(p) }

// Name is the temporary file's path.
func (a *AtomicFile) Name() string { return a.f.Name() }

// Path is the target's path.
func (a *AtomicFile) Path() string { return a.path }

// Commit makes the written content durable and puts it in place: chmod to FileMode, fsync,
// close, a last check of the target (it may have become a link or an input since the start),
// rename over it, fsync of the directory. On an error before the rename the temporary file is
// removed and the target is untouched; an error after it (the directory's fsync) means only that
// durability is not assured.
func (a *AtomicFile) Commit() error {
	if a.done {
		return fmt.Errorf("write %s: already committed or aborted", a.path)
	}
	fail := func(what string, err error) error {
		a.Abort()
		return fmt.Errorf("write %s: %s: %w", a.path, what, err)
	}
	if err := a.f.Chmod(FileMode); err != nil {
		return fail("chmod temporary file", err)
	}
	if err := a.f.Sync(); err != nil {
		return fail("fsync temporary file", err)
	}
	if err := a.f.Close(); err != nil {
		return fail("close temporary file", err)
	}
	if err := CheckTarget(a.path); err != nil {
		return fail("target", err)
	}
	if err := a.files.checkNotInput(a.path); err != nil {
		return fail("target", err)
	}
	if err := os.Rename(a.f.Name(), a.path); err != nil {
		return fail("rename temporary file", err)
	}
	a.done = true
	if err := SyncDir(a.dir); err != nil {
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file; after Commit it does nothing.
func (a *AtomicFile) Abort() {
	if a.done {
		return
	}
	a.done = true
	_ = a.f.Close() // may already be closed by a failed Commit
	_ = os.Remove(a.f.Name())
}

// SyncDir fsyncs a directory so that a rename or creation in it survives a power loss.
// Filesystems that cannot fsync directories report EINVAL or "unsupported"; there is nothing more
// to do on those.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s for fsync: %w", dir, err)
	}
	err = d.Sync()
	cerr := d.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	if cerr != nil {
		return fmt.Errorf("close directory %s: %w", dir, cerr)
	}
	return nil
}
