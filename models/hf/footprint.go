package hf

import (
	"cmp"
	"encoding/binary"
	"maps"
	"slices"

	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/llama"
)

// LoadFootprint is what LoadWith of blocks 0..Blocks-1 maps and reads of a model directory.
type LoadFootprint struct {
	Blocks int
	// Weights is the bytes of the tensors the load touches, as stored: file pages the load reads
	// once (the NaN scan) and every forward pass reads again, so they count as memory.
	Weights int64
	// DTypes are the touched tensors' element types ("BF16"), most bytes first. A tensor that no
	// header lists in F32, F16 or BF16 (the load will refuse it) counts as F32, the widest.
	DTypes []string
	// Scratch is the float32 bytes one workspace converts stored matrices through
	// (llama.Model.ScratchBytes without logits): 0 when every touched matrix reads in place.
	Scratch int64
}

// EstimateLoad is the LoadFootprint of loading blocks 0..blocks-1 of dir (0: all) for a model
// of cfg, from the weight files' headers alone: no file is mapped and no tensor read, so a
// resource pre-flight can refuse before the load and before Check (a file truncated after its
// header still gets the estimate). It predicts LoadWith's choice of matrices read in place (F32,
// 4-byte aligned, q/k/v and gate/up back to back in one file) from the headers' offsets.
func EstimateLoad(dir string, cfg llama.Config, blocks int) (LoadFootprint, error) {
	blocks, err := loadBlocks(cfg, blocks)
	if err != nil {
		return LoadFootprint{}, err
	}
	set, err := safetensors.FindSet(dir)
	if err != nil {
		return LoadFootprint{}, err
	}
	found := map[string]headerEntry{}
	for i, path := range set.Files {
		h, err := safetensors.ReadHeader(path)
		if err != nil {
			return LoadFootprint{}, err
		}
		for _, t := range h.Tensors {
			found[t.Name] = headerEntry{t, h.DataStart, i}
		}
	}
	fp := LoadFootprint{Blocks: blocks}
	bytes := map[string]int64{}
	for _, s := range specs(cfg, blocks) {
		dt := safetensors.F32
		if e, ok := found[s.name]; ok {
			if _, float := storedTypes[e.DType]; float {
				dt = e.DType
			}
		}
		n := int64(s.Elems()) * int64(dt.Size())
		bytes[string(dt)] += n
		fp.Weights += n
	}
	fp.DTypes = slices.SortedFunc(maps.Keys(bytes), func(a, b string) int { return cmp.Or(cmp.Compare(bytes[b], bytes[a]), cmp.Compare(a, b)) })
	d, f, q, kv := cfg.Hidden, cfg.Intermediate, cfg.QDim(), cfg.KVDim()
	for b := 0; b < blocks; b++ {
		name := func(p llama.Part) string { return tensorName(llama.Tensor{Part: p, Block: b}) }
		for _, m := range []struct {
			elems int
			parts []llama.Part
		}{
			{(q + 2*kv) * d, []llama.Part{llama.QProj, llama.KProj, llama.VProj}}, {d * q, []llama.Part{llama.OProj}},
			{2 * f * d, []llama.Part{llama.GateProj, llama.UpProj}}, {d * f, []llama.Part{llama.DownProj}},
		} {
			names := make([]string, len(m.parts))
			for i, p := range m.parts {
				names[i] = name(p)
			}
			if !readsInPlace(found, names) {
				fp.Scratch = max(fp.Scratch, 4*int64(m.elems))
			}
		}
	}
	return fp, nil
}

// headerEntry is a tensor's header row, the offset of its file's data section and its file.
type headerEntry struct {
	safetensors.Info
	dataStart int64
	file      int
}

// readsInPlace predicts whether llama.Assemble views the tensors names, stacked in this order,
// as float32 in place: every one F32, 4-byte aligned in its file (a mapping starts on a page),
// each starting where the one before ends in the same file, on a little-endian host.
func readsInPlace(found map[string]headerEntry, names []string) bool {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return false
	}
	var prev headerEntry
	for i, n := range names {
		e, ok := found[n]
		if !ok || e.DType != safetensors.F32 || (e.dataStart+int64(e.Begin))%4 != 0 {
			return false
		}
		if i > 0 && (e.file != prev.file || e.Begin != prev.End) {
			return false
		}
		prev = e
	}
	return true
}
