package checkpoints

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/nlpodyssey/safetensors"

	"github.com/gelo-research/geloattack/internal/crc"
)

// Checksums. A checkpoint of format version 2 carries two metadata entries:
//
//	geloattack.crc32c         JSON object: tensor name as in the file -> CRC-32C of its raw
//	                          little-endian bytes, 8 lowercase hex digits
//	geloattack.header_crc32c  CRC-32C of the canonical header without this one entry
//
// CRC-32C (Castagnoli) rather than SHA-256: the threat is accidental damage (a flipped bit on disk
// or in transit, a torn copy), not an adversary, who could rewrite any checksum stored beside the
// data anyway. CRC-32C detects every burst of up to 32 flipped bits and every odd number of flips
// in a block of the sizes written here, and Go computes it with the CPU's CRC instructions at many
// GB/s, so verifying a checkpoint costs far less than reading it from disk.
//
// The canonical header is the JSON that the writer produces for the metadata and the tensor table
// (names, dtypes, shapes, data_offsets): encoding/json sorts map keys, so the same values always
// give the same bytes. The header checksum covers every metadata value (step, loss window, RNG
// state, run config, the tensor checksums themselves) and the whole table. A flip that changes no
// value (a JSON escape written another way, a duplicated key) is caught by requiring the header
// bytes to be exactly the canonical encoding of what they hold. Together with the tensor checksums
// this reports a flipped bit anywhere in the file: in the 8-byte length, the header or the data.

// crcOfFloats is the CRC-32C of data encoded as the file stores it (float32, little-endian),
// encoded through a small buffer so that a large tensor is not copied whole.
func crcOfFloats(data []float32) uint32 {
	var buf [4096]byte
	var c uint32
	for len(data) > 0 {
		n := min(len(data), len(buf)/4)
		for i, x := range data[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		c = crc32.Update(c, crc.Castagnoli, buf[:4*n])
		data = data[n:]
	}
	return c
}

// tableEntry is one tensor's row of the header: what the canonical header encodes.
type tableEntry struct {
	name     string
	dtype    safetensors.DType
	shape    []int
	off, end uint64
}

// writtenTable is the tensor table the writer produces for tensors: all F32, laid out in name
// order (the safetensors writer orders by dtype alignment, then name; a checkpoint has one dtype).
func writtenTable(tensors []Tensor) []tableEntry {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	table := make([]tableEntry, len(sorted))
	off := uint64(0)
	for i, t := range sorted {
		end := off + 4*uint64(len(t.Data))
		table[i] = tableEntry{name: t.Name, dtype: safetensors.F32, shape: t.Shape, off: off, end: end}
		off = end
	}
	return table
}

// parsedTable is the tensor table of a parsed file.
func parsedTable(raws []rawTensor) []tableEntry {
	table := make([]tableEntry, len(raws))
	for i, r := range raws {
		table[i] = tableEntry{name: r.name, dtype: r.dtype, shape: r.shape, off: r.off, end: r.off + uint64(len(r.data))}
	}
	return table
}

// canonicalHeader is the JSON header (without padding) that the safetensors writer produces for
// metadata and table: the "__metadata__" object when there is metadata, and one object per tensor.
func canonicalHeader(metadata map[string]string, table []tableEntry) ([]byte, error) {
	obj := make(map[string]any, len(table)+1)
	if len(metadata) > 0 {
		obj[metadataKey] = metadata
	}
	for _, t := range table {
		// A non-nil shape, as the writer encodes it: a nil slice would be JSON null.
		shape := make([]uint64, len(t.shape))
		for i, d := range t.shape {
			shape[i] = uint64(d)
		}
		obj[t.name] = safetensors.TensorInfo{DType: t.dtype, Shape: shape, DataOffsets: [2]uint64{t.off, t.end}}
	}
	return json.Marshal(obj)
}

// headerCRC is the CRC-32C of the canonical header of metadata without keyHeaderCRC, and table.
func headerCRC(metadata map[string]string, table []tableEntry) (uint32, error) {
	rest := maps.Clone(metadata)
	delete(rest, keyHeaderCRC)
	b, err := canonicalHeader(rest, table)
	if err != nil {
		return 0, fmt.Errorf("encode header for its checksum: %w", err)
	}
	return crc32.Checksum(b, crc.Castagnoli), nil
}

// seal adds the tensor checksums and then the header checksum to metadata (a copy; the argument is
// not changed), for tensors as the file will hold them.
func seal(tensors []Tensor, metadata map[string]string) (map[string]string, error) {
	sums := make(map[string]string, len(tensors))
	for _, t := range tensors {
		sums[t.Name] = crc.Hex(crcOfFloats(t.Data))
	}
	sumsJSON, err := json.Marshal(sums)
	if err != nil {
		return nil, fmt.Errorf("tensor checksums: %w", err)
	}
	meta := maps.Clone(metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[keyCRC] = string(sumsJSON)
	c, err := headerCRC(meta, writtenTable(tensors))
	if err != nil {
		return nil, err
	}
	meta[keyHeaderCRC] = crc.Hex(c)
	return meta, nil
}

// verify checks a version 2 checkpoint against its checksums: the header checksum over the
// metadata and tensor table, the header bytes against their canonical encoding, then each
// tensor's bytes. header is the file's header as read (with its padding).
func verify(header []byte, raws []rawTensor, metadata map[string]string) error {
	stored, ok := metadata[keyHeaderCRC]
	if !ok {
		return fmt.Errorf("metadata %s is missing: a version %s checkpoint has checksums (damaged header?)", keyHeaderCRC, formatVersion)
	}
	if !crc.IsHex(stored) {
		return fmt.Errorf("metadata %s is %q, want 8 lowercase hex digits (damaged header?)", keyHeaderCRC, stored)
	}
	table := parsedTable(raws)
	got, err := headerCRC(metadata, table)
	if err != nil {
		return err
	}
	if crc.Hex(got) != stored {
		return fmt.Errorf("header checksum mismatch (stored crc32c %s, header %s): the metadata or the tensor table is damaged", stored, crc.Hex(got))
	}
	canon, err := canonicalHeader(metadata, table)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	for len(canon)%8 != 0 {
		canon = append(canon, ' ')
	}
	if !bytes.Equal(canon, header) {
		i := 0
		for i < len(canon) && i < len(header) && canon[i] == header[i] {
			i++
		}
		return fmt.Errorf("header byte %d (file offset %d) differs from the canonical encoding of the values it holds: the header is damaged", i, 8+i)
	}
	sumsJSON, ok := metadata[keyCRC]
	if !ok {
		return fmt.Errorf("metadata %s is missing: a version %s checkpoint has checksums", keyCRC, formatVersion)
	}
	var sums map[string]string
	if err := json.Unmarshal([]byte(sumsJSON), &sums); err != nil {
		return fmt.Errorf("metadata %s: %w", keyCRC, err)
	}
	for _, r := range raws {
		want, ok := sums[r.name]
		switch {
		case !ok:
			return fmt.Errorf("tensor %q has no checksum in metadata %s", r.name, keyCRC)
		case !crc.IsHex(want):
			return fmt.Errorf("tensor %q: stored checksum %q is not 8 lowercase hex digits", r.name, want)
		}
		if got := crc.Hex(crc32.Checksum(r.data, crc.Castagnoli)); got != want {
			return fmt.Errorf("tensor %q: checksum mismatch (stored crc32c %s, data %s)%s", r.name, want, got, nonFiniteHint(r))
		}
		delete(sums, r.name)
	}
	if len(sums) > 0 {
		names := slices.Sorted(maps.Keys(sums))
		return fmt.Errorf("metadata %s lists tensor %q, which the file lacks", keyCRC, names[0])
	}
	return nil
}

// nonFiniteHint describes the first NaN or infinity of a damaged tensor, if it has one, so that
// the checksum error also says what the damage would have done.
func nonFiniteHint(r rawTensor) string {
	if r.checkDType(true) != nil {
		return ""
	}
	data := make([]float32, r.numel())
	r.decode(data)
	if i := firstNonFinite(data); i >= 0 {
		return "; the damaged data holds " + describeElement(i, r.shape, data[i])
	}
	return ""
}

// checkFinite reports the first NaN or infinity of tensors (file names, weights and moments),
// naming the tensor, the flat element index and its index in the tensor's shape.
func checkFinite(tensors []Tensor) error {
	for _, t := range tensors {
		if i := firstNonFinite(t.Data); i >= 0 {
			return fmt.Errorf("tensor %q: %s: a checkpoint holds only finite values", t.Name, describeElement(i, t.Shape, t.Data[i]))
		}
	}
	return nil
}

// firstNonFinite is the index of the first NaN or infinity of data, or -1.
func firstNonFinite(data []float32) int {
	for i, x := range data {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// describeElement is "element i (index [a b]) is x".
func describeElement(i int, shape []int, x float32) string {
	return fmt.Sprintf("element %d (index %v) is %v", i, unravel(i, shape), x)
}

// unravel turns a flat row-major index into one index per dimension of shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		if shape[k] > 0 {
			idx[k] = i % shape[k]
			i /= shape[k]
		}
	}
	return idx
}
