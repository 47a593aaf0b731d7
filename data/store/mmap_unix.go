//go:build unix

package store

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// mapFile maps a whole file read-only. Pages are read from disk only when touched, which is what
// lets a store larger than memory open in constant time.
func mapFile(path string) ([]byte, func() error, error) {
	// Non-blocking open, then the regular-file check (a FIFO would block a plain open forever).
	f, st, err := safefile.OpenRead(path, safefile.StoreColumns)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size := st.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%d bytes do not fit the address space", size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// willNeed asks the kernel to start reading the pages under part, a sub-slice of the memory map
// whole, so that many small column reads proceed in parallel instead of one fault at a time.
func willNeed(whole, part []byte) {
	if len(part) == 0 || len(whole) == 0 {
		return
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(part))) - uintptr(unsafe.Pointer(unsafe.SliceData(whole))))
	if off < 0 || off+len(part) > len(whole) {
		return
	}
	// The map starts on a page boundary, so rounding the offset down keeps the range inside it.
	lo := off &^ (os.Getpagesize() - 1)
	_ = syscall.Madvise(whole[lo:off+len(part)], syscall.MADV_WILLNEED)
}
