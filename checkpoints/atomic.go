package checkpoints

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// defaultBufSize is the write buffer of an atomic write; large enough that a checkpoint of hundreds
// of megabytes is written in few system calls.
const defaultBufSize = 1 << 20

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
// directory, fsyncs it, renames it over path and fsyncs the directory (safefile.WriteFileAtomic).
// On an error before the rename the old file is untouched and the temporary file removed. A path
// that is a symbolic link or not a regular file is refused.
func WriteFileAtomic(path string, data []byte) error {
	return fsHooks{}.writeFileAtomic(path, data)
}

func (h fsHooks) writeFileAtomic(path string, data []byte) error {
	return h.writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic is WriteFileAtomic with the content produced by fill, through safefile's atomic
// file, with the hook points between its steps.
func (h fsHooks) writeAtomic(path string, fill func(w io.Writer) error) (err error) {
	// rename(2) would replace a link rather than write through it, but a link or FIFO planted
	// where this program writes is a sign of tampering: CreateAtomic refuses it, naming the path.
	f, err := safefile.CreateAtomic(path)
	if err != nil {
		return fmt.Errorf("checkpoints: %w", err)
	}
	defer func() {
		if err != nil {
			f.Abort() // nothing once committed
		}
	}()
	tmp := f.Name()
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
	// Commit syncs, closes and renames in one call: the points of those steps come before it,
	// so that a test failing any of them leaves the old file in place as a failure there would.
	for _, op := range []string{"sync", "close"} {
		if err := h.point(op, tmp); err != nil {
			return fmt.Errorf("checkpoints: write %s: %w", path, err)
		}
	}
	if err := h.point("rename", path); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("checkpoints: %w", err)
	}
	// Past this point the new file is in place (Commit has also fsynced the directory); an
	// error only means its durability is not assured.
	if err := h.point("syncdir", filepath.Dir(path)); err != nil {
		return fmt.Errorf("checkpoints: write %s: %w", path, err)
	}
	return nil
}

// fileMode is the permission of every file this package creates (safefile.FileMode: readable by
// the other users of a shared run directory).
const fileMode = safefile.FileMode

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
