package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrInput reports a write whose target is a file this command read: replacing it would lose the
// input (a tokenizer copied onto itself once truncated it to 0 bytes).
var ErrInput = errors.New("is an input of this command")

// Files is the one door of a command's files. Reads name the file's Kind, which sets its limit
// (see the table in kinds.go) and refuse anything but a regular file at once; writes go to a
// temporary name in the target's directory and are renamed into place, never through a link and
// never onto a file the same Files opened for reading: it remembers each input by device and
// inode, so another name of the same file is the same input.
//
// A command holds one Files for its run and passes it to what reads and writes for it; the zero
// value is ready to use. A nil *Files makes the same checks but remembers no inputs: the
// package-level functions (Read, OpenRead, WriteFileAtomic, ...) are its methods on nil, for
// library code that reads or writes without a command's inputs in view. Files is safe for
// concurrent use.
type Files struct {
	mu     sync.Mutex
	inputs map[fileID]string // first path each input was opened by
}

// fileID identifies a file on this machine whatever its name.
type fileID struct{ dev, ino uint64 }

// idOf is the identity of fi; false where the system gives none.
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}

// note records an opened input.
func (f *Files) note(path string, fi fs.FileInfo) {
	if f == nil {
		return
	}
	id, ok := idOf(fi)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inputs == nil {
		f.inputs = make(map[fileID]string)
	}
	if _, seen := f.inputs[id]; !seen {
		f.inputs[id] = path
	}
}

// NoteInput records path, which the command reads by other means (a memory map through another
// package, a file handed to a child process), as an input: no write through f may replace it. A
// missing path is not an error (nothing to protect).
func (f *Files) NoteInput(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	f.note(path, fi)
	return nil
}

// checkNotInput refuses path when it names (through any link) a file recorded as an input.
func (f *Files) checkNotInput(path string) error {
	if f == nil {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or unreadable, which the write reports): no input there
	}
	id, ok := idOf(fi)
	if !ok {
		return nil
	}
	f.mu.Lock()
	in, found := f.inputs[id]
	f.mu.Unlock()
	if !found {
		return nil
	}
	if in == path {
		return fmt.Errorf("%s %w; refusing to write over it", path, ErrInput)
	}
	return fmt.Errorf("%s %w (read as %s); refusing to write over it", path, ErrInput, in)
}

// OpenRead opens path, a file of kind k, for reading. It refuses at once, naming the path, anything
// but a regular file (a FIFO is opened without blocking and refused; a Config may also be a pipe
// or character device, see Config) and a file larger than the kind's limit (for a streamed kind
// the limit is per line, checked by Lines). Symbolic links are followed: a user may name a file
// through one. The file is recorded as an input of f.
func (f *Files) OpenRead(path string, k Kind) (*os.File, fs.FileInfo, error) {
	return f.openRead(path, k, 0)
}

// OpenReadNoFollow is OpenRead refusing a path whose last element is a symbolic link
// (ErrSymlink): for the files of a run, sweep or store directory, which this program wrote and
// which are never links.
func (f *Files) OpenReadNoFollow(path string, k Kind) (*os.File, fs.FileInfo, error) {
	return f.openRead(path, k, syscall.O_NOFOLLOW)
}

func (f *Files) openRead(path string, k Kind, flag int) (*os.File, fs.FileInfo, error) {
	spec := k.spec()
	var (
		file *os.File
		fi   fs.FileInfo
		err  error
	)
	if spec.stream {
		file, fi, err = openStream(path, flag)
	} else {
		file, fi, err = open(path, os.O_RDONLY|flag, 0)
	}
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode().IsRegular() && spec.how != lines && fi.Size() > spec.max {
		file.Close()
		return nil, nil, tooLargeKind(path, fi.Size(), k)
	}
	f.note(path, fi)
	return file, fi, nil
}

// Read reads path, a file of kind k read whole, refusing what OpenRead refuses; the read itself is
// bounded too (a file may grow while it is read, and a stream has no size).
func (f *Files) Read(path string, k Kind) ([]byte, error) {
	return f.read(path, k, 0)
}

// ReadNoFollow is Read refusing a symbolic link (see OpenReadNoFollow).
func (f *Files) ReadNoFollow(path string, k Kind) ([]byte, error) {
	return f.read(path, k, syscall.O_NOFOLLOW)
}

func (f *Files) read(path string, k Kind, flag int) ([]byte, error) {
	spec := k.spec()
	if spec.how != whole {
		return nil, fmt.Errorf("%s: a %s is not read whole (safefile: Read of kind %s)", path, k, k)
	}
	file, _, err := f.openRead(path, k, flag)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, spec.max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > spec.max {
		return nil, tooLargeKind(path, int64(len(b)), k)
	}
	return b, nil
}

func tooLargeKind(path string, size int64, k Kind) error {
	return fmt.Errorf("%s: %d bytes, %w of %d bytes for a %s", path, size, ErrTooLarge, k.Limit(), k)
}

// Lines opens path, a file of a streamed kind k, for reading line by line under the kind's line
// limit (see LineReader). It refuses what OpenRead refuses.
func (f *Files) Lines(path string, k Kind) (*LineReader, error) {
	spec := k.spec()
	if spec.how != lines {
		return nil, fmt.Errorf("%s: a %s is not read by lines (safefile: Lines of kind %s)", path, k, k)
	}
	file, _, err := f.OpenRead(path, k)
	if err != nil {
		return nil, err
	}
	return newLineReader(file, path, k, spec.line), nil
}

// CheckOutput checks, before any work, that path can be written as an output file: its directory
// exists and is a directory, and path is not a symbolic link, not anything but a regular file and
// not an input of f. A command that writes a file at the end calls it first, so that a mistyped
// -out is refused before hours of work rather than after. The write checks again.
func (f *Files) CheckOutput(path string) error {
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return fmt.Errorf("%s: names a directory, want a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: directory %s does not exist; create it first", path, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	if err := CheckTarget(path); err != nil {
		return err
	}
	return f.checkNotInput(path)
}

// WriteFileAtomic replaces path with data so that a reader, or a process that survives a crash,
// sees the old content or the new, never a mix: a temporary file in the same directory is
// written, fsynced and renamed over path, and the directory fsynced. Before the rename nothing
// at path changes, and on an error the temporary file is removed. A target that is a symbolic
// link, anything but a regular file, or an input of f is refused, naming it.
func (f *Files) WriteFileAtomic(path string, data []byte) error {
	a, err := f.CreateAtomic(path)
	if err != nil {
		return err
	}
	if _, err := a.Write(data); err != nil {
		a.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return a.Commit()
}

// AppendSync appends data to path (created with FileMode if missing) in one write and fsyncs it,
// so a journal written a record at a time (results.jsonl) loses at most its last, cut line when
// the process is killed. The target is checked as CheckOutput checks it.
func (f *Files) AppendSync(path string, data []byte) error {
	if err := f.CheckOutput(path); err != nil {
		return err
	}
	out, err := OpenAppend(path, FileMode)
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		return fmt.Errorf("append %s: %w", path, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// Package-level forms: the door without a memory of inputs.

// OpenRead is (*Files)(nil).OpenRead.
func OpenRead(path string, k Kind) (*os.File, fs.FileInfo, error) {
	return (*Files)(nil).OpenRead(path, k)
}

// OpenReadNoFollow is (*Files)(nil).OpenReadNoFollow.
func OpenReadNoFollow(path string, k Kind) (*os.File, fs.FileInfo, error) {
	return (*Files)(nil).OpenReadNoFollow(path, k)
}

// Read is (*Files)(nil).Read.
func Read(path string, k Kind) ([]byte, error) { return (*Files)(nil).Read(path, k) }

// ReadNoFollow is (*Files)(nil).ReadNoFollow.
func ReadNoFollow(path string, k Kind) ([]byte, error) { return (*Files)(nil).ReadNoFollow(path, k) }

// Lines is (*Files)(nil).Lines.
func Lines(path string, k Kind) (*LineReader, error) { return (*Files)(nil).Lines(path, k) }

// CheckOutput is (*Files)(nil).CheckOutput.
func CheckOutput(path string) error { return (*Files)(nil).CheckOutput(path) }

// WriteFileAtomic is (*Files)(nil).WriteFileAtomic.
func WriteFileAtomic(path string, data []byte) error {
	return (*Files)(nil).WriteFileAtomic(path, data)
}

// CreateAtomic is (*Files)(nil).CreateAtomic.
func CreateAtomic(path string) (*AtomicFile, error) { return (*Files)(nil).CreateAtomic(path) }

// BeginDir is (*Files)(nil).BeginDir.
func BeginDir(path string) (*DirTx, error) { return (*Files)(nil).BeginDir(path) }

// WriteKernel writes data in place to a control file of the kernel under /proc or /sys (such as
// /proc/self/clear_refs), which cannot be replaced by a rename: the one write of this package
// that is not atomic, and so refused for any other path.
func WriteKernel(path string, data []byte) error {
	clean := filepath.Clean(path)
	if !strings.HasPrefix(clean, "/proc/") && !strings.HasPrefix(clean, "/sys/") {
		return fmt.Errorf("%s: not a kernel control file under /proc or /sys", path)
	}
	f, err := os.OpenFile(clean, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
