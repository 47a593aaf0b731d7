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

	"github.com/gelo-research/geloattack/internal/crc"
	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/internal/safetensors"
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

// writtenTable is the tensor table the writer produces for tensors: all F32, laid out in name
// order (see inFileOrder).
func writtenTable(tensors []Tensor) ([]safetensors.Info, error) {
	sorted, err := inFileOrder(tensors)
	if err != nil {
		return nil, err
	}
	return safetensors.Layout(f32Specs(sorted))
}

// parsedTable is the tensor table of a parsed file.
func parsedTable(raws []safetensors.Tensor) []safetensors.Info {
	table := make([]safetensors.Info, len(raws))
	for i, r := range raws {
		table[i] = r.Info
	}
	return table
}

// headerCRC is the CRC-32C of the canonical header of metadata without keyHeaderCRC, and table.
func headerCRC(metadata map[string]string, table []safetensors.Info) (uint32, error) {
	rest := maps.Clone(metadata)
	delete(rest, keyHeaderCRC)
	b, err := safetensors.EncodeHeader(rest, table)
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
	table, err := writtenTable(tensors)
	if err != nil {
		return nil, err
	}
	c, err := headerCRC(meta, table)
	if err != nil {
		return nil, err
	}
	meta[keyHeaderCRC] = crc.Hex(c)
	return meta, nil
}

// verify checks a version 2 checkpoint against its checksums: the header checksum over the
// metadata and tensor table, the header bytes against their canonical encoding, then each
// tensor's bytes. header is the file's header as read (with its padding).
func verify(header []byte, raws []safetensors.Tensor, metadata map[string]string) error {
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
	canon, err := safetensors.EncodeHeader(metadata, table)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	canon = safetensors.Pad(canon)
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
		want, ok := sums[r.Name]
		switch {
		case !ok:
			return fmt.Errorf("tensor %q has no checksum in metadata %s", r.Name, keyCRC)
		case !crc.IsHex(want):
			return fmt.Errorf("tensor %q: stored checksum %q is not 8 lowercase hex digits", r.Name, want)
		}
		if got := crc.Hex(crc32.Checksum(r.Bytes(), crc.Castagnoli)); got != want {
			return fmt.Errorf("tensor %q: checksum mismatch (stored crc32c %s, data %s)%s", r.Name, want, got, nonFiniteHint(r))
		}
		delete(sums, r.Name)
	}
	if len(sums) > 0 {
		names := slices.Sorted(maps.Keys(sums))
		return fmt.Errorf("metadata %s lists tensor %q, which the file lacks", keyCRC, names[0])
	}
	return nil
}

// nonFiniteHint describes the first NaN or infinity of a damaged tensor, if it has one, so that
// the checksum error also says what the damage would have done.
func nonFiniteHint(r safetensors.Tensor) string {
	data := make([]float32, r.NumElements())
	if r.Float32s(data) != nil { // not a float dtype
		return ""
	}
	if i := numfmt.FirstNonFinite(data); i >= 0 {
		return "; the damaged data holds " + describeElement(i, r.Shape, data[i])
	}
	return ""
}

// checkFinite reports the first NaN or infinity of tensors (file names, weights and moments),
// naming the tensor, the flat element index and its index in the tensor's shape.
func checkFinite(tensors []Tensor) error {
	for _, t := range tensors {
		if i := numfmt.FirstNonFinite(t.Data); i >= 0 {
			return fmt.Errorf("tensor %q: %s: a checkpoint holds only finite values", t.Name, describeElement(i, t.Shape, t.Data[i]))
		}
	}
	return nil
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
