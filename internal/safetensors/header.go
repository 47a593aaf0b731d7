package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// entryKeys are the keys of a tensor entry, in the order the writer encodes them.
var entryKeys = []string{"dtype", "shape", "data_offsets"}

// parseHeader decodes the JSON header token by token (so that a key given twice is an error,
// not silently the last one) into the tensor table, in header order, and the metadata map. Only
// the header itself is checked here; Parse checks the offsets against the data section.
func parseHeader(h []byte) ([]Info, map[string]string, error) {
	if i := invalidUTF8At(h); i >= 0 {
		// encoding/json would replace the bad bytes with U+FFFD, so a name or value read back
		// would not be what the file holds.
		return nil, nil, fmt.Errorf("header is not valid UTF-8 (byte %d of the header)", i)
	}
	if len(h) == 0 || h[0] != '{' {
		return nil, nil, errors.New("header does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the '{' just checked
		return nil, nil, fmt.Errorf("invalid header: %w", err)
	}
	meta := map[string]string{}
	var infos []Info
	seen := map[string]bool{}
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return nil, nil, fmt.Errorf("invalid header: %w", err)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("invalid header: key %q given twice", name)
		}
		seen[name] = true
		if name == MetadataKey {
			if meta, err = parseMetadata(dec); err != nil {
				return nil, nil, fmt.Errorf("invalid header: %w", err)
			}
			continue
		}
		if name == "" {
			return nil, nil, errors.New("tensor with an empty name")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("invalid header: tensor %q: %w", name, err)
		}
		info, err := parseEntry(name, raw)
		if err != nil {
			return nil, nil, err
		}
		infos = append(infos, info)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, fmt.Errorf("invalid header: %w", err)
	}
	// Only whitespace (the writer's padding) may follow the object.
	switch _, err := dec.Token(); {
	case err == nil:
		return nil, nil, errors.New("invalid header: data after the JSON object")
	case err != io.EOF:
		return nil, nil, fmt.Errorf("invalid header: after the JSON object: %w", err)
	}
	return infos, meta, nil
}

// objectKey reads the next key of a JSON object.
func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok { // the decoder only returns strings here, but a hostile file must not become a panic
		return "", fmt.Errorf("object key %v is not a string", tok)
	}
	return key, nil
}

// parseMetadata reads the "__metadata__" value: an object of strings, or null for none.
func parseMetadata(dec *json.Decoder) (map[string]string, error) {
	meta := map[string]string{}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MetadataKey, err)
	}
	if tok == nil {
		return meta, nil
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%s is not a JSON object", MetadataKey)
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", MetadataKey, err)
		}
		if _, dup := meta[key]; dup {
			return nil, fmt.Errorf("%s %q given twice", MetadataKey, key)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", MetadataKey, key, err)
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%s %q: value %v is not a string", MetadataKey, key, tok)
		}
		meta[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", MetadataKey, err)
	}
	return meta, nil
}

// parseEntry checks one tensor entry: exactly the keys dtype (a known dtype), shape (non-negative
// integers whose product fits an int) and data_offsets (two non-negative integers, the end not
// before the start, spanning exactly the shape's bytes).
func parseEntry(name string, raw json.RawMessage) (Info, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Info{}, fmt.Errorf("invalid header: tensor %q: entry %.40s is not a JSON object", name, raw)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return Info{}, fmt.Errorf("invalid header: tensor %q: %w", name, err)
		}
		if _, dup := fields[key]; dup {
			return Info{}, fmt.Errorf("invalid header: tensor %q: key %q given twice", name, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Info{}, fmt.Errorf("invalid header: tensor %q: %w", name, err)
		}
		fields[key] = v
	}
	for _, k := range entryKeys {
		if _, ok := fields[k]; !ok {
			return Info{}, fmt.Errorf("tensor %q: missing %q", name, k)
		}
	}
	if len(fields) != len(entryKeys) {
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !slices.Contains(entryKeys, k) {
				return Info{}, fmt.Errorf("tensor %q: unexpected key %q: expected 3 keys (dtype, shape, data_offsets)", name, k)
			}
		}
	}

	var dtype string
	if err := json.Unmarshal(fields["dtype"], &dtype); err != nil || string(fields["dtype"]) == "null" {
		return Info{}, fmt.Errorf("tensor %q: invalid \"dtype\" %.40s: want a string", name, fields["dtype"])
	}
	dt := DType(dtype)
	if dt.Size() == 0 {
		return Info{}, fmt.Errorf("tensor %q: invalid dtype %q", name, dtype)
	}
	dims, err := uints(fields["shape"])
	if err != nil {
		return Info{}, fmt.Errorf("tensor %q: invalid \"shape\" %.80s: %w", name, fields["shape"], err)
	}
	offs, err := uints(fields["data_offsets"])
	if err == nil && len(offs) != 2 {
		err = fmt.Errorf("%d values, want 2", len(offs))
	}
	if err != nil {
		return Info{}, fmt.Errorf("tensor %q: invalid \"data_offsets\" %.80s: %w", name, fields["data_offsets"], err)
	}

	shape := make([]int, len(dims))
	for i, d := range dims {
		if d > math.MaxInt {
			return Info{}, fmt.Errorf("tensor %q: dimension %d of shape %v is too large", name, i, dims)
		}
		shape[i] = int(d)
	}
	numel, err := NumElements(shape)
	if err != nil {
		return Info{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	s, e := offs[0], offs[1]
	if e < s {
		return Info{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] end before they start", name, s, e)
	}
	size := uint64(dt.Size())
	if uint64(numel) > math.MaxUint64/size || uint64(numel)*size != e-s {
		return Info{}, fmt.Errorf("tensor %q: %s shape %v needs %d elements of %d bytes, but data_offsets [%d, %d] span %d bytes",
			name, dt, shape, numel, size, s, e, e-s)
	}
	if e > math.MaxInt {
		return Info{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] run past any file", name, s, e)
	}
	return Info{Name: name, DType: dt, Shape: shape, Begin: int(s), End: int(e)}, nil
}

// uints decodes a JSON array of non-negative integers, written as plain digits (no sign,
// fraction or exponent) that fit a uint64.
func uints(raw json.RawMessage) ([]uint64, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	errWant := errors.New("want an array of non-negative integers")
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errWant
	}
	var out []uint64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok || !allDigits(string(num)) {
			return nil, errWant
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", num, err)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// invalidUTF8At is the index of the first byte of b that is not valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// entry is a tensor's header entry as the writer encodes it: the keys in the reference
// implementation's order, the shape never null.
type entry struct {
	DType       DType     `json:"dtype"`
	Shape       []int     `json:"shape"`
	DataOffsets [2]uint64 `json:"data_offsets"`
}

// EncodeHeader is the JSON header, without padding, that the writer produces for metadata and
// table: a "__metadata__" object when metadata is not empty, and one entry per tensor, keys
// sorted by encoding/json, so that the same values always give the same bytes. It refuses what
// the encoding would alter or merge: invalid UTF-8, a name given twice, the reserved name.
func EncodeHeader(metadata map[string]string, table []Info) ([]byte, error) {
	if err := checkMetadata(metadata); err != nil {
		return nil, err
	}
	obj := make(map[string]any, len(table)+1)
	if len(metadata) > 0 {
		obj[MetadataKey] = metadata
	}
	for _, t := range table {
		if err := checkName(t.Name); err != nil {
			return nil, err
		}
		if _, dup := obj[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		if t.Begin < 0 || t.End < t.Begin {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] out of order", t.Name, t.Begin, t.End)
		}
		shape := slices.Clone(t.Shape)
		if shape == nil {
			shape = []int{} // a scalar: [] rather than null, which no reader accepts
		}
		obj[t.Name] = entry{DType: t.DType, Shape: shape, DataOffsets: [2]uint64{uint64(t.Begin), uint64(t.End)}}
	}
	return json.Marshal(obj)
}

// checkName refuses a tensor name that the header cannot carry faithfully.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("tensor with an empty name")
	case name == MetadataKey:
		return fmt.Errorf("tensor name %q is reserved for the metadata map", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("tensor name %q is not valid UTF-8", name)
	}
	return nil
}

// checkMetadata refuses strings that JSON encoding would silently alter (invalid UTF-8 becomes
// U+FFFD), so that what is written is what is read.
func checkMetadata(metadata map[string]string) error {
	for k, v := range metadata {
		if !utf8.ValidString(k) {
			return fmt.Errorf("metadata key %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("metadata %q: value is not valid UTF-8", k)
		}
	}
	return nil
}
