package store

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// npyArray is one decoded .npy array: its dtype descriptor, C-order shape and raw little-endian
// bytes. The .npy reader is our own because float16 ('<f2') arrays, which the reference layout
// uses, are outside what github.com/sbinet/npyio decodes.
type npyArray struct {
	descr string
	shape []int
	data  []byte
}

// itemSize is the byte width of the dtypes an import accepts.
var npyItemSize = map[string]int{
	"|b1": 1, "|i1": 1, "|u1": 1, "<i4": 4, "<i8": 8, "<f2": 2, "<f4": 4,
}

// normaliseDescr maps descriptors without a byte-order mark (single bytes, or '=' native
// little-endian) onto the canonical forms above.
func normaliseDescr(s string) string {
	switch s {
	case "b1", "?", "|?":
		return "|b1"
	case "i1", "<i1", "=i1":
		return "|i1"
	case "u1", "<u1", "=u1":
		return "|u1"
	}
	if strings.HasPrefix(s, "=") {
		return "<" + s[1:]
	}
	return s
}

// maxNPYExpansion bounds how much larger than its compressed size a zip entry may claim to be
// before its bytes are allocated; deflate cannot expand by more than about 1032:1.
const maxNPYExpansion = 1100

// readNPY reads one .npy entry of a zip archive.
func readNPY(f *zip.File) (npyArray, error) {
	if f.UncompressedSize64 > maxNPYExpansion*f.CompressedSize64+4096 {
		return npyArray{}, fmt.Errorf("claims %d bytes from %d compressed: corrupt archive", f.UncompressedSize64, f.CompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return npyArray{}, err
	}
	defer rc.Close()
	var pre [10]byte
	if _, err := io.ReadFull(rc, pre[:8]); err != nil {
		return npyArray{}, fmt.Errorf("npy header: %w", err)
	}
	if !bytes.Equal(pre[:6], []byte("\x93NUMPY")) {
		return npyArray{}, fmt.Errorf("npy magic %q: not a .npy array", pre[:6])
	}
	var hlen int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(rc, pre[8:10]); err != nil {
			return npyArray{}, fmt.Errorf("npy header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(rc, l[:]); err != nil {
			return npyArray{}, fmt.Errorf("npy header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(l[:]))
	default:
		return npyArray{}, fmt.Errorf("npy version %d.%d: want 1, 2 or 3", pre[6], pre[7])
	}
	if hlen > 1<<20 || uint64(hlen) > f.UncompressedSize64 {
		return npyArray{}, fmt.Errorf("npy header length %d: corrupt", hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(rc, hdr); err != nil {
		return npyArray{}, fmt.Errorf("npy header: %w", err)
	}
	a, fortran, err := parseNPYHeader(string(hdr))
	if err != nil {
		return npyArray{}, fmt.Errorf("npy header %q: %w", strings.TrimSpace(string(hdr)), err)
	}
	size, ok := npyItemSize[a.descr]
	if !ok {
		return npyArray{}, fmt.Errorf("dtype %q is not one an import reads", a.descr)
	}
	// The product of the non-zero dimensions must fit: a shape whose product wraps to a small
	// number (or to zero) would pass the size check below and index out of range later.
	n, elems := uint64(size), uint64(1)
	for _, s := range a.shape {
		if s == 0 {
			continue
		}
		hi, lo := bits.Mul64(elems, uint64(s))
		if hi != 0 || lo > math.MaxInt64/uint64(size) {
			return npyArray{}, fmt.Errorf("shape %v: the product of its dimensions overflows 64 bits", a.shape)
		}
		elems = lo
	}
	for _, s := range a.shape {
		n *= uint64(s)
		if n > f.UncompressedSize64 {
			return npyArray{}, fmt.Errorf("shape %v needs more bytes than the %d-byte entry holds", a.shape, f.UncompressedSize64)
		}
	}
	if fortran && len(a.shape) > 1 {
		return npyArray{}, fmt.Errorf("fortran_order arrays are not supported")
	}
	a.data = make([]byte, n)
	if _, err := io.ReadFull(rc, a.data); err != nil {
		return npyArray{}, fmt.Errorf("npy data (%d bytes for shape %v %s): %w", n, a.shape, a.descr, err)
	}
	return a, nil
}

// parseNPYHeader parses the Python dict literal of a .npy header, e.g.
// {'descr': '<f2', 'fortran_order': False, 'shape': (12, 384), }.
func parseNPYHeader(h string) (a npyArray, fortran bool, err error) {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(h, "}") {
		return a, false, fmt.Errorf("not a dict literal")
	}
	body := h[1 : len(h)-1]
	seen := map[string]bool{}
	for {
		body = strings.TrimLeft(body, " ,\n\t")
		if body == "" {
			break
		}
		key, rest, err := pyString(body)
		if err != nil {
			return a, false, err
		}
		rest = strings.TrimLeft(rest, " ")
		if !strings.HasPrefix(rest, ":") {
			return a, false, fmt.Errorf("key %q without ':'", key)
		}
		rest = strings.TrimLeft(rest[1:], " ")
		switch key {
		case "descr":
			var d string
			if d, rest, err = pyString(rest); err != nil {
				return a, false, fmt.Errorf("descr: %w", err)
			}
			a.descr = normaliseDescr(d)
		case "fortran_order":
			switch {
			case strings.HasPrefix(rest, "False"):
				rest = rest[5:]
			case strings.HasPrefix(rest, "True"):
				fortran, rest = true, rest[4:]
			default:
				return a, false, fmt.Errorf("fortran_order: want True or False")
			}
		case "shape":
			end := strings.IndexByte(rest, ')')
			if !strings.HasPrefix(rest, "(") || end < 0 {
				return a, false, fmt.Errorf("shape: want a tuple")
			}
			for _, tok := range strings.Split(rest[1:end], ",") {
				tok = strings.TrimSpace(tok)
				if tok == "" {
					continue
				}
				v, err := strconv.Atoi(strings.TrimSuffix(tok, "L"))
				if err != nil || v < 0 {
					return a, false, fmt.Errorf("shape: bad dimension %q", tok)
				}
				a.shape = append(a.shape, v)
			}
			rest = rest[end+1:]
		default:
			return a, false, fmt.Errorf("unknown key %q", key)
		}
		seen[key] = true
		body = rest
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return a, false, fmt.Errorf("missing key %q", k)
		}
	}
	return a, fortran, nil
}

// pyString reads a quoted Python string literal (no escapes: npy headers never need them).
func pyString(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", s, fmt.Errorf("want a quoted string at %q", trunc(s))
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", s, fmt.Errorf("unterminated string at %q", trunc(s))
	}
	return s[1 : 1+end], s[2+end:], nil
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// squeezeLeading drops leading dimensions of size 1 until want dimensions remain, so that a
// batch-of-one export (1, seq, d) reads like (seq, d).
func squeezeLeading(shape []int, want int) ([]int, bool) {
	for len(shape) > want && shape[0] == 1 {
		shape = shape[1:]
	}
	return shape, len(shape) == want
}
