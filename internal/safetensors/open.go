package safetensors

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Open maps the safetensors file at path and validates it (see Parse). It opens without blocking
// and refuses anything but a regular file (a FIFO, device or directory; see internal/safefile).
// Errors name the file. The mapping is read-only and lives until Close; a file truncated by
// another process while mapped faults the reader, as with any memory map.
func Open(path string) (*File, error) { return open(path, safefile.OpenRead) }

// OpenNoFollow is Open refusing a path whose last element is a symbolic link.
func OpenNoFollow(path string) (*File, error) { return open(path, safefile.OpenReadNoFollow) }

func open(path string, opener func(string, safefile.Kind) (*os.File, fs.FileInfo, error)) (*File, error) {
	f, fi, err := opener(path, safefile.Weights)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: %w", path, errShort(int(size))) // and an empty file cannot be mapped
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("%s: %d bytes do not fit the address space", path, size)
	}
	mem, release, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf, err := Parse(mem)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf.release = release
	return sf, nil
}
