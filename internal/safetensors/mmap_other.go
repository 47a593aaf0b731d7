//go:build !unix

package safetensors

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first size bytes of f where memory maps are not available.
func mapFile(f *os.File, size int) (mem []byte, release func() error, err error) {
	mem = make([]byte, size)
	if _, err := io.ReadFull(f, mem); err != nil {
		return nil, nil, fmt.Errorf("read %d bytes: %w", size, err)
	}
	return mem, func() error { return nil }, nil
}
