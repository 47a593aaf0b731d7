package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// This file reads the Arrow IPC file format (magic, stream of encapsulated messages, flatbuffer
// footer, footer length, magic) directly from a byte slice that is usually a memory map. Every
// buffer of a record batch comes back as a sub-slice of that map, so reading a column touches
// only its own pages and nothing is copied or decompressed.

var arrowMagic = []byte("ARROW1")

// Flatbuffer enum values of the Arrow format (Schema.fbs, Message.fbs).
const (
	fbTypeInt           = 2
	fbTypeFloatingPoint = 3
	fbTypeUtf8          = 5
	fbTypeFixedSizeList = 16

	fbHeaderRecordBatch = 3

	fbMetadataV4 = 3
	fbMetadataV5 = 4
)

var fbTypeNames = map[uint8]string{
	0: "none", 1: "null", 2: "int", 3: "floating_point", 4: "binary", 5: "utf8", 6: "bool",
	7: "decimal", 8: "date", 9: "time", 10: "timestamp", 11: "interval", 12: "list", 13: "struct",
	14: "union", 15: "fixed_size_binary", 16: "fixed_size_list", 17: "map", 18: "duration",
	19: "large_binary", 20: "large_utf8", 21: "large_list", 22: "run_end_encoded",
	23: "binary_view", 24: "utf8_view", 25: "list_view", 26: "large_list_view",
}

// arrowType is a schema field's type, decoded only as far as a store needs.
type arrowType struct {
	id        uint8 // flatbuffer Type union tag
	bits      int   // int: bit width
	signed    bool  // int: signedness
	precision int   // floating point: 16, 32 or 64
	listSize  int   // fixed_size_list: width
	elem      *arrowType
	dict      bool // dictionary-encoded
}

func (t arrowType) String() string {
	var s string
	switch t.id {
	case fbTypeInt:
		if t.signed {
			s = fmt.Sprintf("int%d", t.bits)
		} else {
			s = fmt.Sprintf("uint%d", t.bits)
		}
	case fbTypeFloatingPoint:
		s = fmt.Sprintf("float%d", t.precision)
	case fbTypeFixedSizeList:
		elem := "?"
		if t.elem != nil {
			elem = t.elem.String()
		}
		s = fmt.Sprintf("fixed_size_list<%s>[%d]", elem, t.listSize)
	default:
		if n, ok := fbTypeNames[t.id]; ok {
			s = n
		} else {
			s = fmt.Sprintf("type#%d", t.id)
		}
	}
	if t.dict {
		s = "dictionary<" + s + ">"
	}
	return s
}

// arrowField is one top-level schema field.
type arrowField struct {
	name string
	typ  arrowType
}

// arrowBlock locates one record batch message in the file.
type arrowBlock struct {
	offset int64
	meta   int64
	body   int64
}

// fieldNode is a record batch's (length, null_count) of one array in depth-first order.
type fieldNode struct {
	length, nulls int64
}

// recordBatch is one decoded record batch: its row count, field nodes and buffers (sub-slices
// of the file, each checked to lie inside the batch body).
type recordBatch struct {
	rows  int64
	nodes []fieldNode
	bufs  [][]byte
}

// arrowFile is a parsed Arrow IPC file: schema and record batch locations.
type arrowFile struct {
	data   []byte
	fields []arrowField
	blocks []arrowBlock
}

// parseArrowFile checks the file's framing and decodes its footer.
func parseArrowFile(data []byte) (*arrowFile, error) {
	const tail = 4 + 6 // footer length + magic
	if len(data) < 8+tail {
		return nil, fmt.Errorf("file of %d bytes is too small for an Arrow IPC file", len(data))
	}
	if !bytes.Equal(data[:6], arrowMagic) {
		return nil, fmt.Errorf("leading magic %q: not an Arrow IPC file", data[:6])
	}
	if !bytes.Equal(data[len(data)-6:], arrowMagic) {
		return nil, fmt.Errorf("trailing magic %q: file truncated or not an Arrow IPC file", data[len(data)-6:])
	}
	flen := int64(int32(binary.LittleEndian.Uint32(data[len(data)-tail:])))
	footerEnd := int64(len(data)) - tail
	if flen <= 0 || flen > footerEnd-8 {
		return nil, fmt.Errorf("footer length %d does not fit a file of %d bytes", flen, len(data))
	}
	footerStart := footerEnd - flen
	footer, err := fbRoot(data[footerStart:footerEnd])
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	f := &arrowFile{data: data}
	schema, ok, err := footer.table(1)
	if err != nil || !ok {
		return nil, fmt.Errorf("footer: no schema (%v)", err)
	}
	if err := f.readSchema(schema); err != nil {
		return nil, fmt.Errorf("footer: schema: %w", err)
	}
	if dicts, ok, err := footer.vector(2, 24); err != nil {
		return nil, fmt.Errorf("footer: dictionaries: %w", err)
	} else if ok && dicts.n > 0 {
		return nil, fmt.Errorf("footer: %d dictionary batches: dictionaries are not part of a store", dicts.n)
	}
	blocks, ok, err := footer.vector(3, 24)
	if err != nil {
		return nil, fmt.Errorf("footer: record batches: %w", err)
	}
	if ok {
		f.blocks = make([]arrowBlock, blocks.n)
		for i := range f.blocks {
			b := blocks.bytesAt(i)
			blk := arrowBlock{
				offset: int64(binary.LittleEndian.Uint64(b[0:])),
				meta:   int64(int32(binary.LittleEndian.Uint32(b[8:]))),
				body:   int64(binary.LittleEndian.Uint64(b[16:])),
			}
			switch {
			case blk.offset < 8 || blk.offset%8 != 0:
				return nil, fmt.Errorf("record batch %d: offset %d: want a multiple of 8 after the magic", i, blk.offset)
			case blk.meta < 8 || blk.meta%8 != 0:
				return nil, fmt.Errorf("record batch %d: metadata length %d: want a positive multiple of 8", i, blk.meta)
			case blk.body < 0 || blk.body%8 != 0:
				return nil, fmt.Errorf("record batch %d: body length %d: want a multiple of 8", i, blk.body)
			case blk.offset > footerStart || blk.meta > footerStart-blk.offset || blk.body > footerStart-blk.offset-blk.meta:
				return nil, fmt.Errorf("record batch %d: bytes [%d, %d+%d+%d) run past the footer at %d: file truncated or corrupt",
					i, blk.offset, blk.offset, blk.meta, blk.body, footerStart)
			}
			f.blocks[i] = blk
		}
	}
	return f, nil
}

func (f *arrowFile) readSchema(schema fbTable) error {
	endianness, err := schema.i16(0, 0)
	if err != nil {
		return err
	}
	if endianness != 0 {
		return fmt.Errorf("big-endian data: stores are little-endian")
	}
	fields, ok, err := schema.vector(1, 4)
	if err != nil {
		return fmt.Errorf("fields: %w", err)
	}
	if !ok {
		return nil
	}
	const maxFields = 64 // a store has 4; more means the file is something else
	if fields.n > maxFields {
		return fmt.Errorf("%d fields: not a store file", fields.n)
	}
	for i := 0; i < fields.n; i++ {
		ft, err := fields.tableAt(i)
		if err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
		name, err := ft.str(0)
		if err != nil {
			return fmt.Errorf("field %d: name: %w", i, err)
		}
		typ, err := readType(ft, 0)
		if err != nil {
			return fmt.Errorf("field %d (%q): %w", i, name, err)
		}
		f.fields = append(f.fields, arrowField{name: name, typ: typ})
	}
	return nil
}

// readType decodes a Field table's type; depth bounds recursion on crafted input.
func readType(field fbTable, depth int) (arrowType, error) {
	if depth > 2 {
		return arrowType{}, fmt.Errorf("types nested deeper than a store's")
	}
	id, err := field.u8(2, 0)
	if err != nil {
		return arrowType{}, err
	}
	t := arrowType{id: id}
	if _, dict, err := field.table(4); err != nil {
		return t, err
	} else if dict {
		t.dict = true
	}
	body, ok, err := field.table(3)
	if err != nil {
		return t, fmt.Errorf("type: %w", err)
	}
	switch id {
	case fbTypeInt:
		if !ok {
			return t, fmt.Errorf("int type without parameters")
		}
		bits, err := body.i32(0, 0)
		if err != nil {
			return t, err
		}
		signed, err := body.u8(1, 0)
		if err != nil {
			return t, err
		}
		t.bits, t.signed = int(bits), signed != 0
	case fbTypeFloatingPoint:
		if !ok {
			return t, fmt.Errorf("floating point type without parameters")
		}
		p, err := body.i16(0, 0)
		if err != nil {
			return t, err
		}
		t.precision = map[int16]int{0: 16, 1: 32, 2: 64}[p]
	case fbTypeFixedSizeList:
		if !ok {
			return t, fmt.Errorf("fixed_size_list type without parameters")
		}
		size, err := body.i32(0, 0)
		if err != nil {
			return t, err
		}
		t.listSize = int(size)
		children, ok, err := field.vector(5, 4)
		if err != nil {
			return t, fmt.Errorf("children: %w", err)
		}
		if !ok || children.n != 1 {
			return t, fmt.Errorf("fixed_size_list without exactly one child")
		}
		child, err := children.tableAt(0)
		if err != nil {
			return t, fmt.Errorf("child: %w", err)
		}
		elem, err := readType(child, depth+1)
		if err != nil {
			return t, fmt.Errorf("child: %w", err)
		}
		t.elem = &elem
	}
	return t, nil
}

// schemaString renders the schema for error messages.
func (f *arrowFile) schemaString() string {
	parts := make([]string, len(f.fields))
	for i, fl := range f.fields {
		parts[i] = fmt.Sprintf("%s: %s", fl.name, fl.typ)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// batch decodes the header of record batch i and slices its buffers out of the file.
func (f *arrowFile) batch(i int) (recordBatch, error) {
	blk := f.blocks[i]
	msg := f.data[blk.offset : blk.offset+blk.meta]
	prefix, mlen := int64(4), int64(int32(binary.LittleEndian.Uint32(msg)))
	if uint32(mlen) == 0xFFFFFFFF {
		prefix, mlen = 8, int64(int32(binary.LittleEndian.Uint32(msg[4:])))
	}
	if mlen <= 0 || mlen > int64(len(msg))-prefix {
		return recordBatch{}, fmt.Errorf("record batch %d: message length %d does not fit its %d-byte block", i, mlen, blk.meta)
	}
	root, err := fbRoot(msg[prefix : prefix+mlen])
	if err != nil {
		return recordBatch{}, fmt.Errorf("record batch %d: message: %w", i, err)
	}
	version, err := root.i16(0, 0)
	if err != nil {
		return recordBatch{}, fmt.Errorf("record batch %d: message: %w", i, err)
	}
	if version != fbMetadataV4 && version != fbMetadataV5 {
		return recordBatch{}, fmt.Errorf("record batch %d: metadata version %d: want V4 or V5", i, int(version)+1)
	}
	htype, err := root.u8(1, 0)
	if err != nil {
		return recordBatch{}, fmt.Errorf("record batch %d: message: %w", i, err)
	}
	if htype != fbHeaderRecordBatch {
		return recordBatch{}, fmt.Errorf("record batch %d: message type %d is not a record batch", i, htype)
	}
	bodyLen, err := root.i64(3, 0)
	if err != nil {
		return recordBatch{}, fmt.Errorf("record batch %d: message: %w", i, err)
	}
	if bodyLen != blk.body {
		return recordBatch{}, fmt.Errorf("record batch %d: message body length %d, footer says %d", i, bodyLen, blk.body)
	}
	rb, ok, err := root.table(2)
	if err != nil || !ok {
		return recordBatch{}, fmt.Errorf("record batch %d: no header (%v)", i, err)
	}
	var out recordBatch
	if out.rows, err = rb.i64(0, 0); err != nil {
		return recordBatch{}, fmt.Errorf("record batch %d: length: %w", i, err)
	}
	if out.rows < 0 {
		return recordBatch{}, fmt.Errorf("record batch %d: length %d", i, out.rows)
	}
	if _, compressed, err := rb.table(3); err != nil || compressed {
		return recordBatch{}, fmt.Errorf("record batch %d: compressed body: stores must be uncompressed so they can be memory-mapped (%v)", i, err)
	}
	nodes, ok, err := rb.vector(1, 16)
	if err != nil || !ok {
		return recordBatch{}, fmt.Errorf("record batch %d: field nodes missing or corrupt (%v)", i, err)
	}
	const maxBuffers = 64
	bufs, ok, err := rb.vector(2, 16)
	if err != nil || !ok || nodes.n > maxBuffers || bufs.n > maxBuffers {
		return recordBatch{}, fmt.Errorf("record batch %d: buffers missing or corrupt (%d nodes, %d buffers, %v)", i, nodes.n, bufs.n, err)
	}
	out.nodes = make([]fieldNode, nodes.n)
	for j := range out.nodes {
		b := nodes.bytesAt(j)
		out.nodes[j] = fieldNode{
			length: int64(binary.LittleEndian.Uint64(b)),
			nulls:  int64(binary.LittleEndian.Uint64(b[8:])),
		}
	}
	body := f.data[blk.offset+blk.meta : blk.offset+blk.meta+blk.body]
	out.bufs = make([][]byte, bufs.n)
	for j := range out.bufs {
		b := bufs.bytesAt(j)
		off := int64(binary.LittleEndian.Uint64(b))
		n := int64(binary.LittleEndian.Uint64(b[8:]))
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return recordBatch{}, fmt.Errorf("record batch %d: buffer %d at [%d, %d+%d) outside the %d-byte body", i, j, off, off, n, len(body))
		}
		out.bufs[j] = body[off : off+n : off+n]
	}
	return out, nil
}
