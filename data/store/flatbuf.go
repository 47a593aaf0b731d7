package store

import (
	"encoding/binary"
	"fmt"
)

// The Arrow IPC footer and message headers are flatbuffers. They are read here with a bounds
// check on every access, because the bytes come from files that may be truncated or corrupt, and
// a length taken on trust can make a generic decoder index out of range or allocate without
// bound. Only the handful of tables a store needs are decoded.

// fbTable is one flatbuffers table inside buf.
type fbTable struct {
	buf    []byte
	pos    int // start of the table (its soffset to the vtable)
	vt     int // start of the vtable
	vtLen  int // vtable size in bytes
	tblLen int // table size in bytes (inline part)
}

func fbU16(buf []byte, off int) (int, error) {
	if off < 0 || off > len(buf)-2 {
		return 0, fmt.Errorf("flatbuffer offset %d+2 outside %d bytes", off, len(buf))
	}
	return int(binary.LittleEndian.Uint16(buf[off:])), nil
}

func fbU32(buf []byte, off int) (uint32, error) {
	if off < 0 || off > len(buf)-4 {
		return 0, fmt.Errorf("flatbuffer offset %d+4 outside %d bytes", off, len(buf))
	}
	return binary.LittleEndian.Uint32(buf[off:]), nil
}

func fbU64(buf []byte, off int) (uint64, error) {
	if off < 0 || off > len(buf)-8 {
		return 0, fmt.Errorf("flatbuffer offset %d+8 outside %d bytes", off, len(buf))
	}
	return binary.LittleEndian.Uint64(buf[off:]), nil
}

// fbRoot returns the root table of a flatbuffer.
func fbRoot(buf []byte) (fbTable, error) {
	u, err := fbU32(buf, 0)
	if err != nil {
		return fbTable{}, err
	}
	return fbTableAt(buf, int64(u))
}

func fbTableAt(buf []byte, pos int64) (fbTable, error) {
	if pos < 0 || pos > int64(len(buf))-4 {
		return fbTable{}, fmt.Errorf("flatbuffer table at %d outside %d bytes", pos, len(buf))
	}
	so, _ := fbU32(buf, int(pos))
	vt := pos - int64(int32(so))
	if vt < 0 || vt > int64(len(buf))-4 {
		return fbTable{}, fmt.Errorf("flatbuffer vtable at %d outside %d bytes", vt, len(buf))
	}
	vtLen, _ := fbU16(buf, int(vt))
	tblLen, _ := fbU16(buf, int(vt)+2)
	if vtLen < 4 || vtLen%2 != 0 || int64(vtLen) > int64(len(buf))-vt {
		return fbTable{}, fmt.Errorf("flatbuffer vtable at %d: bad size %d", vt, vtLen)
	}
	if tblLen < 4 || int64(tblLen) > int64(len(buf))-pos {
		return fbTable{}, fmt.Errorf("flatbuffer table at %d: bad size %d", pos, tblLen)
	}
	return fbTable{buf: buf, pos: int(pos), vt: int(vt), vtLen: vtLen, tblLen: tblLen}, nil
}

// field returns the absolute offset of field i whose inline size is size, or -1 when absent.
func (t fbTable) field(i, size int) (int, error) {
	slot := 4 + 2*i
	if slot+2 > t.vtLen {
		return -1, nil
	}
	o, _ := fbU16(t.buf, t.vt+slot)
	if o == 0 {
		return -1, nil
	}
	if o+size > t.tblLen {
		return 0, fmt.Errorf("flatbuffer field %d at %d+%d outside its table of %d bytes", i, o, size, t.tblLen)
	}
	return t.pos + o, nil
}

func (t fbTable) u8(i int, def uint8) (uint8, error) {
	o, err := t.field(i, 1)
	if err != nil || o < 0 {
		return def, err
	}
	return t.buf[o], nil
}

func (t fbTable) i16(i int, def int16) (int16, error) {
	o, err := t.field(i, 2)
	if err != nil || o < 0 {
		return def, err
	}
	v, err := fbU16(t.buf, o)
	return int16(v), err
}

func (t fbTable) i32(i int, def int32) (int32, error) {
	o, err := t.field(i, 4)
	if err != nil || o < 0 {
		return def, err
	}
	v, err := fbU32(t.buf, o)
	return int32(v), err
}

func (t fbTable) i64(i int, def int64) (int64, error) {
	o, err := t.field(i, 8)
	if err != nil || o < 0 {
		return def, err
	}
	v, err := fbU64(t.buf, o)
	return int64(v), err
}

// indirect follows the uoffset stored in field i; ok is false when the field is absent.
func (t fbTable) indirect(i int) (pos int64, ok bool, err error) {
	o, err := t.field(i, 4)
	if err != nil || o < 0 {
		return 0, false, err
	}
	u, err := fbU32(t.buf, o)
	if err != nil {
		return 0, false, err
	}
	return int64(o) + int64(u), true, nil
}

// table returns the sub-table in field i.
func (t fbTable) table(i int) (fbTable, bool, error) {
	pos, ok, err := t.indirect(i)
	if err != nil || !ok {
		return fbTable{}, false, err
	}
	sub, err := fbTableAt(t.buf, pos)
	return sub, err == nil, err
}

// fbVector is a vector of n elements of elemSize bytes starting at start.
type fbVector struct {
	buf      []byte
	start, n int
	elemSize int
}

// vector returns the vector in field i, checked to lie inside the buffer.
func (t fbTable) vector(i, elemSize int) (fbVector, bool, error) {
	pos, ok, err := t.indirect(i)
	if err != nil || !ok {
		return fbVector{}, false, err
	}
	if pos > int64(len(t.buf))-4 {
		return fbVector{}, false, fmt.Errorf("flatbuffer vector at %d outside %d bytes", pos, len(t.buf))
	}
	n, _ := fbU32(t.buf, int(pos))
	start := pos + 4
	if int64(n)*int64(elemSize) > int64(len(t.buf))-start {
		return fbVector{}, false, fmt.Errorf("flatbuffer vector at %d: %d elements of %d bytes outside %d bytes", pos, n, elemSize, len(t.buf))
	}
	return fbVector{buf: t.buf, start: int(start), n: int(n), elemSize: elemSize}, true, nil
}

// tableAt returns element j of a vector of tables.
func (v fbVector) tableAt(j int) (fbTable, error) {
	o := v.start + 4*j
	u, err := fbU32(v.buf, o)
	if err != nil {
		return fbTable{}, err
	}
	return fbTableAt(v.buf, int64(o)+int64(u))
}

// bytesAt returns the inline bytes of struct element j.
func (v fbVector) bytesAt(j int) []byte {
	o := v.start + v.elemSize*j
	return v.buf[o : o+v.elemSize]
}

// str returns the string in field i ("" when absent).
func (t fbTable) str(i int) (string, error) {
	v, ok, err := t.vector(i, 1)
	if err != nil || !ok {
		return "", err
	}
	return string(v.buf[v.start : v.start+v.n]), nil
}
