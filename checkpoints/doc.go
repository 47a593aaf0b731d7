// Package checkpoints reads and writes model weights and training state as safetensors files,
// atomically, so that a run killed at any moment resumes from a complete checkpoint.
//
// # Weights files
//
// Save writes named float32 tensors in the safetensors format with PyTorch's conventions: row-major
// ("C") order, little-endian, linear weights as [out, in], a "__metadata__" map of strings. The file
// is laid out by internal/safetensors: an 8-byte little-endian header length, a JSON header padded
// with spaces to a multiple of 8 bytes, then the raw data; tensors appear in the file (and in what
// Load returns) sorted by name, so the same input always gives the same bytes (the bytes that the
// earlier writer, github.com/nlpodyssey/safetensors, produced: testdata holds files it wrote). The model
// config is stored as JSON under the metadata key MetaConfig ("config"), and files meant for PyTorch
// tools carry MetaFormat = "pt". Save writes the metadata it is given verbatim.
//
// Readers (Load, LoadInto, LoadAny) map the file and treat it as hostile (see internal/safetensors):
// a truncated or corrupt file, a header length larger than the file, a header that is not UTF-8 JSON,
// a key given twice, out-of-order, overlapping or out-of-range data_offsets, a shape that does not
// match its byte range or an unexpected dtype is an error naming the file and the fault. Nothing is
// allocated from a length that the file size does not back. Load and LoadInto accept F32 only; LoadAny also converts F16 and BF16 (exactly, NaN payloads,
// infinities and subnormals included) for pretrained weights such as all-MiniLM-L6-v2.
//
// # Checkpoints
//
// A checkpoint is ONE safetensors file, ckpt-<step>.safetensors, holding the weights under their own
// names, the AdamW moments under "adam.m.<param>" and "adam.v.<param>" (same shapes as the
// parameter), and the scalar resume state in metadata:
//
//	format                    "pt"
//	geloattack.kind           "checkpoint"
//	geloattack.version        "2" ("1": written before checksums)
//	geloattack.step           optimizer updates applied, decimal
//	geloattack.next_batch     index of the next batch of the data stream, decimal
//	geloattack.seed           the run's base seed, decimal uint64
//	geloattack.rng            JSON object: generator name -> base64 of its serialized state
//	geloattack.best_step      step of the best evaluation, decimal
//	geloattack.best           JSON object: metric -> value as a Go-formatted float string ("NaN", "+Inf" allowed)
//	geloattack.last           same, for the last evaluation
//	geloattack.crc32c         JSON object: tensor name -> CRC-32C of its raw bytes, 8 lowercase hex digits
//	geloattack.header_crc32c  CRC-32C of the canonical header (all metadata but this, and the tensor table)
//
// plus the caller's metadata (the model config under "config").
//
// # Integrity
//
// LoadCheckpoint verifies every tensor's checksum, the header checksum and that the header bytes
// are the canonical encoding of the values they hold, so a flipped bit anywhere in the file is an
// error naming the file (and, for data, the tensor with both checksums) rather than a run that
// resumes with altered weights or step. It then refuses NaN and Inf in weights and moments, naming
// the tensor and element; SaveCheckpoint refuses to write them. Checkpoints of version 1 load
// unverified, with Checkpoint.Verified false and a note in Checkpoint.Notes for the user.
// LoadLatestGood resumes from the newest checkpoint that verifies when the latest is damaged, and
// reports what it skipped. One file rather than weights and
// state side by side means a single rename installs a checkpoint, so weights and optimizer state can
// never come from different saves. The moments make a checkpoint about three times the size of the
// weights; an exported model for other tools is written with Save alone.
//
// Restore is the one path from a loaded checkpoint into a model: it copies the weights into an
// engine.Params after checking every name and shape (all or nothing, the error naming the file and
// each tensor that differs) and, for a resumed run, sets the AdamW moments and step. On resume the
// checkpoint is read once, by runner.Train through LoadLatestGood, and handed to train.Train.
//
// A run directory holds the checkpoints and a pointer file "latest" whose content is the file name of
// the newest complete checkpoint followed by a newline. SaveCheckpoint writes the checkpoint to a
// temporary file, fsyncs it, renames it into place, fsyncs the directory, and only then replaces
// "latest" the same way; Prune removes old checkpoints but never the one "latest" names. Whatever
// moment a process dies, "latest" is either absent (no checkpoint was ever completed) or names a
// complete file. Leftover temporary files (".ckpt-*.tmp-*", ".latest.tmp-*") are ignored by readers
// and removed by the next SaveCheckpoint. One run directory has one writer at a time.
package checkpoints
