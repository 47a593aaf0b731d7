package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Header is a file's tensor table read without its data, for an estimate made before a file is
// mapped: DataStart is the offset of the data section in the file.
type Header struct {
	Tensors   []Info
	DataStart int64
}

// ReadHeader reads the header of the safetensors file at path and nothing after it: the header
// length and the JSON table, parsed and checked as Parse checks them, but not against the data
// (a file truncated after its header, or with gaps, still reads; Open refuses it). A resource
// pre-flight sizes a load with it before any tensor is touched.
func ReadHeader(path string) (Header, error) {
	f, fi, err := safefile.OpenRead(path, safefile.Weights)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, errShort(int(min(fi.Size(), 8))))
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > MaxHeader || size > uint64(fi.Size()-8) {
		return Header{}, fmt.Errorf("%s: header length %d exceeds the file's %d bytes after it or the format's limit of %d", path, size, fi.Size()-8, MaxHeader)
	}
	h := make([]byte, size)
	if _, err := io.ReadFull(f, h); err != nil {
		return Header{}, fmt.Errorf("%s: header: %w", path, err)
	}
	infos, _, err := parseHeader(h)
	if err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return Header{Tensors: infos, DataStart: 8 + int64(size)}, nil
}
