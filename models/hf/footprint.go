package hf

import (
	"cmp"
	"maps"
	"slices"

	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/llama"
)

// LoadFootprint is what LoadWith of blocks 0..Blocks-1 holds of a model directory.
type LoadFootprint struct {
	Blocks int
	// Weights is the bytes of the tensors the load touches, as stored: BF16 and F16 ones as the
	// mapped file pages every forward pass reads, F32 ones as their heap copy.
	Weights int64
	// DTypes are the touched tensors' element types ("BF16"), most bytes first. A tensor that no
	// header lists in F32, F16 or BF16 (the load will refuse it) counts as F32, the widest.
	DTypes []string
	// Scratch is the float32 bytes a decoder converts stored block matrices into per pass
	// (llama.Model.ScratchBytes without logits): 0 for a float32 checkpoint.
	Scratch int64
}

// EstimateLoad is the LoadFootprint of loading blocks 0..blocks-1 of dir (0: all) for a model
// of cfg, from the weight files' headers alone: no file is mapped and no tensor read, so a
// resource pre-flight can refuse before the load and before Check (a file truncated after its
// header still gets the estimate).
func EstimateLoad(dir string, cfg llama.Config, blocks int) (LoadFootprint, error) {
	blocks, err := loadBlocks(cfg, blocks)
	if err != nil {
		return LoadFootprint{}, err
	}
	set, err := safetensors.FindSet(dir)
	if err != nil {
		return LoadFootprint{}, err
	}
	types := map[string]safetensors.DType{}
	for _, path := range set.Files {
		h, err := safetensors.ReadHeader(path)
		if err != nil {
			return LoadFootprint{}, err
		}
		for _, t := range h.Tensors {
			if _, float := storedTypes[t.DType]; float {
				types[t.Name] = t.DType
			}
		}
	}
	dtype := func(name string) safetensors.DType { return cmp.Or(types[name], safetensors.F32) }
	fp := LoadFootprint{Blocks: blocks}
	bytes := map[string]int64{}
	for _, s := range specs(cfg, blocks) {
		dt := dtype(s.name)
		n := int64(s.Elems()) * int64(dt.Size())
		bytes[string(dt)] += n
		fp.Weights += n
	}
	fp.DTypes = slices.SortedFunc(maps.Keys(bytes), func(a, b string) int { return cmp.Or(cmp.Compare(bytes[b], bytes[a]), cmp.Compare(a, b)) })
	d, f, q, kv := cfg.Hidden, cfg.Intermediate, cfg.QDim(), cfg.KVDim()
	// One float32 buffer per block matrix that some block stores as F16/BF16 (the Decoder's
	// per-pass conversion, shared by the blocks).
	for _, m := range []struct {
		elems int
		parts []llama.Part
	}{
		{(q + 2*kv) * d, []llama.Part{llama.QProj, llama.KProj, llama.VProj}}, {d * q, []llama.Part{llama.OProj}},
		{2 * f * d, []llama.Part{llama.GateProj, llama.UpProj}}, {d * f, []llama.Part{llama.DownProj}},
	} {
		converts := false
		for b := 0; b < blocks && !converts; b++ {
			for _, p := range m.parts {
				converts = converts || dtype(tensorName(llama.Tensor{Part: p, Block: b})) != safetensors.F32
			}
		}
		if converts {
			fp.Scratch += 4 * int64(m.elems)
		}
	}
	return fp, nil
}
