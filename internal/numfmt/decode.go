package numfmt

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// The little-endian decoders below widen a file's stored elements (safetensors, checkpoints) into
// float32, len(dst) of them from raw. Aligned bytes on a little-endian host are read as 16- or
// 32-bit words in place, as fast as a copy (a bf16 Llama-3-8B block converts at memory speed);
// unaligned bytes, or a big-endian host, are assembled byte by byte. Both give the same bits.

// F32sFromLE decodes little-endian float32 elements.
func F32sFromLE(dst []float32, raw []byte) {
	raw = raw[:4*len(dst)]
	if inPlace(raw, 4) {
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), len(dst)))
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
}

// BF16sFromLE decodes little-endian bfloat16 elements (BF16ToF32 each).
func BF16sFromLE(dst []float32, raw []byte) {
	raw = raw[:2*len(dst)]
	if inPlace(raw, 2) {
		for i, v := range unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(raw))), len(dst)) {
			dst[i] = BF16ToF32(v)
		}
		return
	}
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
	}
}

// F16sFromLE decodes little-endian binary16 elements (F16ToF32 each).
func F16sFromLE(dst []float32, raw []byte) {
	raw = raw[:2*len(dst)]
	if inPlace(raw, 2) {
		for i, v := range unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(raw))), len(dst)) {
			dst[i] = F16ToF32(v)
		}
		return
	}
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
	}
}

// inPlace reports whether raw (non-empty) can be read as words of size bytes where it lies: the
// host is little-endian, as the files are, and raw starts at a multiple of size.
func inPlace(raw []byte, size uintptr) bool {
	return len(raw) > 0 && binary.NativeEndian.Uint16([]byte{1, 0}) == 1 &&
		uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%size == 0
}
