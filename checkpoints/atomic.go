package checkpoints

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// defaultBufSize is the write buffer of an atomic write; large enough that a checkpoint of hundreds
// of megabytes is written in few system calls.
const defaultBufSize = 1 << 20

// fileMode is the permission of every file this package creates; os.CreateTemp makes 0600 files,
// which would hide checkpoints from other users of a shared run directory.
const fileMode = 0o644

// fsHooks lets tests observe or fail each step of a file operation. The zero value does nothing and
// is what every exported function uses.
type fsHooks struct {
	// at is called before each step with the step's name ("create", "write", "sync", "close",
	// "rename", "syncdir", "remove") and the file it concerns. A non-nil error aborts the
	// operation as if that step had failed.
	at func(op, path string) error
	// chunk, when positive, splits every write to the file into pieces of at most chunk bytes
	// with a "write" point before each, so tests can observe partially written files.
	chunk int
}

func (h fsHooks) point(op, path string) error {
	if h.at == nil {
		return nil
	}
	return h.at(op, path)
}

// WriteFileAtomic replaces path with data so that a reader (or a process that survives a crash)
// sees either the old content or the new, never a mix: it writes a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory. On an error before the
// rename the old file is untouched and the temporary file removed. A path that is a symbolic link
// or not a regular file is refused (safefile.CheckTarget).
func WriteFileAtomic(path string, data []byte) error {
	return fsHooks{}.writeFileAtomic(path, data)
}

func (h fsHooks) writeFileAtomic(path string, data []byte) error {
	return h.writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic is WriteFileAtomic with the content produced by fill.
func (h fsHooks) writeAtomic(path string, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return fmt.Errorf("checkpoints: write %q: path names a directory", path)
	}
	if dir == "" {
		dir = "."
	}
	// rename(2) would replace a link rather than write through it, but a link or FIFO planted
	// where this program writes is a sign of tampering: refuse it, naming the path.
	if err := safefile.CheckTarget(path); err != nil {
		return fmt.Errorf("checkpoints: write %w", err)
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("checkpoints: write %s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	renamed, closed := false, false
	defer func() {
		if err == nil {
			return
		}
		if !closed {
			_ = f.Close()
		}
		if !renamed {
			_ = os.Remove(tmp)
		}
	}()

	if err := h.point("create", tmp); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(hookWriter{w: f, h: h, path: tmp}, defaultBufSize)
	if err := fill(bw); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := h.point("sync", tmp); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("checkpoints: write %s: chmod temporary file: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("checkpoints: write %s: fsync temporary file: %w", path, err)
	}
	if err := h.point("close", tmp); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoints: write %s: close temporary file: %w", path, err)
	}
	if err := h.point("rename", path); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoints: write %s: rename temporary file: %w", path, err)
	}
	renamed = true
	// Past this point the new file is in place; an error only means its durability is not assured.
	if err := h.point("syncdir", dir); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	return nil
}

// tempPattern is the os.CreateTemp pattern for a temporary file replacing base: hidden, so that
// directory listings and globs for ckpt-*.safetensors never see it.
func tempPattern(base string) string {
	return "." + base + ".tmp-*"
}

// syncDir fsyncs a directory so that a rename in it survives a power loss. Filesystems that cannot
// fsync directories report EINVAL or "unsupported"; there is nothing more to do on those.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
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

// hookWriter passes writes to the temporary file, calling the "write" hook before each piece.
type hookWriter struct {
	w    io.Writer
	h    fsHooks
	path string
}

func (w hookWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		piece := p
		if w.h.chunk > 0 && len(piece) > w.h.chunk {
			piece = piece[:w.h.chunk]
		}
		if err := w.h.point("write", w.path); err != nil {
			return written, err
		}
		n, err := w.w.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		p = p[len(piece):]
	}
	return written, nil
}
