// Package safefile is the one door of this program's files: every read of a file a user names (or
// a directory holds) and every write goes through it, so none re-decides what the others learned
// about the traps a hostile or mistaken path can set: a FIFO or device where a file is expected (an
// open that blocks forever, or a read that never ends), a file far larger than its kind ever is, a
// symbolic link that carries a write out of its directory, a write onto the command's own input,
// and a directory left half-written by a failure.
//
// Reads name the file's Kind; one table (kinds.go) gives each kind's limit and how it is read
// (whole, line by line, or mapped). Opens use O_NONBLOCK and check the open file (fstat) before
// reading, so a FIFO is refused instead of waiting for a writer. Writes go to a temporary file in
// the target's directory renamed into place (WriteFileAtomic, CreateAtomic), and refuse a target
// that is a symbolic link, not a regular file, or an input (Files remembers what a command read);
// a new directory is built beside its target and renamed into place whole (BeginDir).
//
// The byte-limit functions (ReadFile, ReadFileNoFollow) and the raw opens (Open, Create,
// OpenAppend, OpenLock, OpenStream) are the primitives the door is built on, for the few writers
// with a file layout of their own (a store's temporaries, the metrics log, the run lock).
// internal/layering's test holds every other package to this one for its opens.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular reports a path that is a FIFO, device, socket or directory where a regular file
// is expected.
var ErrNotRegular = errors.New("not a regular file")

// ErrSymlink reports a path that is a symbolic link where this program writes (or reads without
// following links).
var ErrSymlink = errors.New("is a symbolic link")

// ErrTooLarge reports a file larger than the bound for its kind.
var ErrTooLarge = errors.New("larger than the limit")

// Open opens path for reading when it is a regular file (following symbolic links), without
// blocking on a FIFO: the open is non-blocking and the opened file is checked before any read.
// A missing file gives an error wrapping fs.ErrNotExist.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return open(path, os.O_RDONLY, 0)
}

// OpenNoFollow is Open refusing a path whose last element is a symbolic link (ErrSymlink).
func OpenNoFollow(path string) (*os.File, fs.FileInfo, error) {
	return open(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// OpenAppend opens (creating if needed, mode perm) path for appending, refusing a symbolic link
// and anything that is not a regular file.
func OpenAppend(path string, perm fs.FileMode) (*os.File, error) {
	f, _, err := open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, perm)
	return f, err
}

// OpenLock opens (creating if needed) a lock file for reading and writing without truncating it,
// refusing a symbolic link and anything that is not a regular file.
func OpenLock(path string, perm fs.FileMode) (*os.File, error) {
	f, _, err := open(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, perm)
	return f, err
}

func open(path string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		if flag&syscall.O_NOFOLLOW != 0 && errors.Is(err, syscall.ELOOP) {
			return nil, nil, symlinkError(path)
		}
		if errors.Is(err, syscall.ENXIO) {
			// A FIFO opened for writing with no reader.
			return nil, nil, fmt.Errorf("%s: %w (a FIFO or socket)", path, ErrNotRegular)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	// Reads of a regular file never block; clearing the flag keeps the file's behaviour plain.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, fi, nil
}

// kind names a non-regular file mode for a message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "mode " + m.String()
}

func symlinkError(path string) error {
	return fmt.Errorf("%s %w; refusing to follow it (it could lead out of the directory)", path, ErrSymlink)
}

// ReadFile reads a regular file of at most limit bytes (following symbolic links), refusing a
// larger one with ErrTooLarge, naming the file and the limit.
//
// Deprecated: name the file's Kind, whose limit the table states, and use Read.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	return readBounded(f, fi, path, limit)
}

// ReadFileNoFollow is ReadFile refusing a symbolic link.
//
// Deprecated: name the file's Kind and use ReadNoFollow.
func ReadFileNoFollow(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenNoFollow(path)
	if err != nil {
		return nil, err
	}
	return readBounded(f, fi, path, limit)
}

func readBounded(f *os.File, fi fs.FileInfo, path string, limit int64) ([]byte, error) {
	defer f.Close()
	if fi.Size() > limit {
		return nil, tooLarge(path, fi.Size(), limit)
	}
	// The size can change while reading: bound the read too.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(path, int64(len(b)), limit)
	}
	return b, nil
}

func tooLarge(path string, size, limit int64) error {
	return fmt.Errorf("%s: %d bytes, %w of %d bytes for this file", path, size, ErrTooLarge, limit)
}

// CheckTarget refuses to write path when it exists as a symbolic link (ErrSymlink) or as anything
// but a regular file (ErrNotRegular). A missing path is fine.
func CheckTarget(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return symlinkError(path)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s); refusing to replace it", path, ErrNotRegular, kind(fi.Mode()))
	}
	return nil
}

// OpenStream opens path for reading as a stream that may be a regular file, a pipe or a
// character device (a config given as <(...) or /dev/stdin), refusing a directory. The open never
// blocks: a FIFO that no process writes reads as empty instead of waiting for a writer forever.
// The caller bounds what it reads.
func OpenStream(path string) (*os.File, error) {
	f, _, err := openStream(path, 0)
	return f, err
}

// openStream is OpenStream with extra open flags (O_NOFOLLOW), returning the file's information.
func openStream(path string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flag, 0)
	if err != nil {
		if flag&syscall.O_NOFOLLOW != 0 && errors.Is(err, syscall.ELOOP) {
			return nil, nil, symlinkError(path)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (a directory)", path, ErrNotRegular)
	}
	// Blocking reads from here: a pipe with a writer waits for its data, one without reads EOF.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, fi, nil
}

// Create creates or truncates path for writing (mode perm), refusing a symbolic link (the
// truncation would empty the link's target) and anything that is not a regular file, without
// blocking on a FIFO.
func Create(path string, perm fs.FileMode) (*os.File, error) {
	f, _, err := open(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm)
	return f, err
}
