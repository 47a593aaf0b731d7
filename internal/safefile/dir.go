package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DirTx writes a new directory whole or not at all: everything is built in a temporary sibling
// (Path) and renamed to the target by Commit, so a failure, an interrupt or a crash leaves no
// half-written directory that a rerun would refuse or a reader would take for a complete one.
type DirTx struct {
	files   *Files
	target  string
	parent  string
	tmp     string
	created []string // parent directories BeginDir made, deepest last
	done    bool
}

// BeginDir checks the output directory target before any work and starts building it. The target
// must not exist, or be an empty directory (which Commit replaces); a symbolic link, a file, or a
// directory holding anything is refused naming what it holds, because a new directory is written
// whole and never merged into an old one. Missing parent directories are created (and removed
// again by Abort). The caller writes into Path, then calls Commit, or Abort on any error (Abort
// after Commit does nothing, so it can be deferred).
func (f *Files) BeginDir(target string) (*DirTx, error) {
	if err := checkDirTarget(target); err != nil {
		return nil, err
	}
	clean := filepath.Clean(target)
	parent, base := filepath.Dir(clean), filepath.Base(clean)
	if base == "." || base == ".." || base == string(filepath.Separator) {
		return nil, fmt.Errorf("%s: name a new directory", target)
	}
	tx := &DirTx{files: f, target: target, parent: parent}
	if err := tx.makeParents(); err != nil {
		tx.Abort()
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, TempPattern(base))
	if err != nil {
		tx.Abort()
		return nil, fmt.Errorf("%s: create the temporary directory beside it: %w", target, err)
	}
	tx.tmp = tmp
	return tx, nil
}

// checkDirTarget refuses a target that exists as anything but an empty directory.
func checkDirTarget(target string) error {
	fi, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return symlinkError(target)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %w (%s), want a new directory", target, ErrNotRegular, kind(fi.Mode()))
	}
	d, err := os.Open(target)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(4)
	if err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", target, err)
	}
	if len(names) > 0 {
		more := ""
		if len(names) == 4 {
			more = ", ..."
		}
		return fmt.Errorf("%s already holds %s%s: not overwriting it (a new directory is written whole, never into an old one; name a new or empty directory)",
			target, strings.Join(names, ", "), more)
	}
	return nil
}

// makeParents creates the missing directories above the target, remembering them for Abort.
func (tx *DirTx) makeParents() error {
	var missing []string
	for p := tx.parent; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", tx.target, err)
		}
		missing = append(missing, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			return fmt.Errorf("%s: create %s: %w", tx.target, missing[i], err)
		}
		tx.created = append(tx.created, missing[i])
	}
	return nil
}

// Path is the temporary directory to build in.
func (tx *DirTx) Path() string { return tx.tmp }

// Target is the directory Commit creates.
func (tx *DirTx) Target() string { return tx.target }

// Commit puts the built directory in place: it fsyncs it, checks the target once more (it may
// have been created since BeginDir), renames the temporary directory to it and fsyncs the
// parent. On an error the temporary directory is removed (Abort).
func (tx *DirTx) Commit() error {
	if tx.done {
		return fmt.Errorf("%s: already committed or aborted", tx.target)
	}
	if err := SyncDir(tx.tmp); err != nil {
		tx.Abort()
		return fmt.Errorf("%s: %w", tx.target, err)
	}
	if err := os.Chmod(tx.tmp, 0o755); err != nil { // os.MkdirTemp makes it 0700
		tx.Abort()
		return fmt.Errorf("%s: %w", tx.target, err)
	}
	if err := checkDirTarget(tx.target); err != nil {
		tx.Abort()
		return err
	}
	// rename(2) replaces an empty directory and fails on any other, so the check above cannot
	// be raced into overwriting something. (os.Rename refuses every existing directory, for
	// Windows' sake: call the system directly.)
	if err := syscall.Rename(tx.tmp, tx.target); err != nil {
		err = &os.LinkError{Op: "rename", Old: tx.tmp, New: tx.target, Err: err}
		tx.Abort()
		return fmt.Errorf("%s: rename the built directory into place: %w", tx.target, err)
	}
	tx.done = true
	if err := SyncDir(tx.parent); err != nil {
		return fmt.Errorf("%s: %w", tx.target, err)
	}
	return nil
}

// Abort removes the temporary directory and the parents BeginDir created (those still empty);
// after Commit it does nothing.
func (tx *DirTx) Abort() {
	if tx.done {
		return
	}
	tx.done = true
	if tx.tmp != "" {
		_ = os.RemoveAll(tx.tmp)
	}
	for i := len(tx.created) - 1; i >= 0; i-- {
		_ = os.Remove(tx.created[i]) // fails, as it should, on a directory someone else filled
	}
}
