// Package safetensors reads and writes the safetensors format: an 8-byte little-endian header
// length, a JSON header (a "__metadata__" map of strings and one entry per tensor with its
// dtype, shape and data_offsets, padded with spaces to a multiple of 8 bytes), then the tensors'
// raw little-endian bytes. It is the one implementation of the format in the project: checkpoints,
// the Hugging Face model directories of models/hf (with their shard sets) and the BERT loader of
// models/bert read and write through it, and convert F16 and BF16 through internal/numfmt.
//
// # Reading
//
// Every file is treated as hostile. Open maps the file read-only (pages are read when touched, so
// a multi-gigabyte shard costs page cache, not heap) and Parse validates the whole header before
// anything is returned: the header length against the file and the format's 100 MB limit, the
// header as UTF-8 JSON that starts with '{', no key given twice, metadata values that are strings,
// each tensor entry with exactly dtype, shape and data_offsets, a known dtype, dimensions and
// offsets that are non-negative integers, a shape whose byte size is exactly its data_offsets'
// span, and data_offsets that tile the data section: in order, with no gap, overlap or overrun,
// and no byte left over. Each fault is an error naming the tensor and the values involved; nothing
// is allocated from a length that the file's size does not back. The rules are the reference
// implementation's, stricter where it is lenient (a key given twice, an empty name); its sub-byte
// dtypes (F4, F6_*) are not read.
//
// # Writing
//
// NewWriter lays tensors out back to back in the order given and writes the header as
// EncodeHeader encodes it: encoding/json of the metadata and the table, so keys are sorted and
// the same values always give the same bytes (checkpoints verify their header against it).
package safetensors
