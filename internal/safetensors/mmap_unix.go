//go:build unix

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only; release unmaps them.
func mapFile(f *os.File, size int) (mem []byte, release func() error, err error) {
	mem, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return mem, func() error { return syscall.Munmap(mem) }, nil
}
