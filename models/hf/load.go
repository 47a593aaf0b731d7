package hf

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/internal/workpool"
	"github.com/gelo-research/geloattack/models/llama"
)

// File names of a Hugging Face model directory.
const (
	ConfigFile  = "config.json"
	WeightsFile = safetensors.SingleFile
	IndexFile   = safetensors.IndexFile
)

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (llama.Config, error) {
	path := filepath.Join(dir, ConfigFile)
	raw, err := safefile.Read(path, safefile.ModelConfig)
	if err != nil {
		return llama.Config{}, err
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// tensorNames are the Hugging Face names of the parts; a block's are prefixed by
// "model.layers.N.".
var tensorNames = map[llama.Part]string{
	llama.Embedding: "model.embed_tokens.weight", llama.AttnNorm: "input_layernorm.weight",
	llama.QProj: "self_attn.q_proj.weight", llama.KProj: "self_attn.k_proj.weight", llama.VProj: "self_attn.v_proj.weight",
	llama.QBias: "self_attn.q_proj.bias", llama.KBias: "self_attn.k_proj.bias", llama.VBias: "self_attn.v_proj.bias",
	llama.QNorm: "self_attn.q_norm.weight", llama.KNorm: "self_attn.k_norm.weight", llama.OProj: "self_attn.o_proj.weight",
	llama.MLPNorm: "post_attention_layernorm.weight", llama.GateProj: "mlp.gate_proj.weight", llama.UpProj: "mlp.up_proj.weight",
	llama.DownProj: "mlp.down_proj.weight", llama.FinalNorm: "model.norm.weight", llama.LMHead: "lm_head.weight",
}

// tensorName is the Hugging Face name of a weight tensor.
func tensorName(t llama.Tensor) string {
	if t.Part.InBlock() {
		return fmt.Sprintf("model.layers.%d.%s", t.Block, tensorNames[t.Part])
	}
	return tensorNames[t.Part]
}

// tensorSpec is one weight of a config: its Hugging Face name, part, block and shape.
type tensorSpec struct {
	name string
	llama.Tensor
}

// specs lists the tensors of blocks 0..blocks-1 of c (blocks >= c.Layers: every tensor) in
// Hugging Face's names and file order, which is also the order in which llama.Random draws them.
func specs(c llama.Config, blocks int) []tensorSpec {
	ts := c.Tensors(blocks)
	out := make([]tensorSpec, len(ts))
	for i, t := range ts {
		out[i] = tensorSpec{tensorName(t), t}
	}
	return out
}

// ignorable reports tensors that checkpoints carry but that the forward pass recomputes: the
// rotary inverse frequencies some Llama conversions saved as buffers.
func ignorable(name string) bool {
	return strings.HasSuffix(name, ".self_attn.rotary_emb.inv_freq")
}

// LoadOptions configures LoadWith.
type LoadOptions struct {
	// Lib computes the matrix products (nil: blas.Default()).
	Lib *blas.Library
	// Blocks loads blocks 0..Blocks-1 only (0: all of them): the model runs those blocks and
	// reaches block Blocks-1's output (llama.Model.Blocks); nothing past them is read, and the
	// final norm and output projection are not loaded.
	Blocks int
}

// Load is LoadWith of every block.
func Load(dir string, lib *blas.Library) (*llama.Model, error) {
	return LoadWith(dir, LoadOptions{Lib: lib})
}

// LoadWith maps a model directory (config.json and the weights of model.safetensors or of the
// shards that model.safetensors.index.json lists) and makes a decoder over the weights as stored
// (llama.Assemble): BF16 and F16 matrices are computed from the mapped files, which stay mapped
// until the model's Close; F32 tensors are copied to the heap, and a float32 checkpoint's files
// are closed once copied. Every file's header is checked against the config (as Check does); the
// tensors the model holds are scanned for NaN and infinities, which refuses a damaged file before
// any forward pass and reads them once. Memory: the touched tensors' bytes (BF16 and F16: half of
// float32), plus a forward pass's scratch (EstimateLoad).
func LoadWith(dir string, opt LoadOptions) (*llama.Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	blocks, err := loadBlocks(cfg, opt.Blocks)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.FindSet(dir)
	if err != nil {
		return nil, err
	}
	files, err := set.Map()
	if err != nil {
		return nil, err
	}
	m, err := assemble(set, files, cfg, blocks, opt.Lib)
	if err != nil {
		_ = files.Close()
		return nil, err
	}
	return m, nil
}

// loadBlocks checks a block count against the config (0: all).
func loadBlocks(cfg llama.Config, blocks int) (int, error) {
	switch {
	case blocks == 0:
		return cfg.Layers, nil
	case blocks < 0 || blocks > cfg.Layers:
		return 0, fmt.Errorf("load blocks 0..%d: the model has blocks 0..%d", blocks-1, cfg.Layers-1)
	}
	return blocks, nil
}

// assemble checks the mapped files against cfg and makes the model of blocks 0..blocks-1 over
// them; the model's Close closes the files.
func assemble(set safetensors.Set, files *safetensors.Mapped, cfg llama.Config, blocks int, lib *blas.Library) (*llama.Model, error) {
	tiedHead, err := checkTensors(set, cfg, files.Each)
	if err != nil {
		return nil, err
	}
	for _, s := range specs(cfg, blocks) {
		t, path, _ := files.Tensor(s.name) // checkTensors found every one
		if err := checkFinite(t); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if tiedHead != "" && blocks == cfg.Layers {
		// Some tied checkpoints store the output projection anyway; it must be the embedding.
		head, _, _ := files.Tensor("lm_head.weight")
		emb, _, _ := files.Tensor(tensorNames[llama.Embedding])
		if err := sameRows(head, emb, cfg.Hidden); err != nil {
			return nil, fmt.Errorf("%s: %w", tiedHead, err)
		}
	}
	return llama.Assemble(cfg, lib, blocks, func(lt llama.Tensor) (llama.Stored, error) {
		t, _, _ := files.Tensor(tensorName(lt))
		return llama.Stored{DType: storedTypes[t.DType], Raw: t.Bytes()}, nil
	}, files.Close)
}

// storedTypes maps the file types a model reads to llama's (checkTensors refuses others).
var storedTypes = map[safetensors.DType]llama.DType{safetensors.F32: llama.F32, safetensors.F16: llama.F16, safetensors.BF16: llama.BF16}

// checkFinite refuses a NaN or infinity in t, scanning its bytes on every core: a model weight
// that is not finite is a damaged or hostile file.
func checkFinite(t safetensors.Tensor) error {
	var mu sync.Mutex
	first := -1
	workpool.Chunks(runtime.GOMAXPROCS(0), t.NumElements(), 1<<22, func(lo, hi int) {
		if i := t.FirstNonFiniteAt(lo, hi); i >= 0 {
			mu.Lock()
			if first < 0 || i < first {
				first = i
			}
			mu.Unlock()
		}
	})
	if first < 0 {
		return nil
	}
	x := make([]float32, 1)
	_ = t.Float32sAt(first, x) // a float type: checkTensors refused others
	return fmt.Errorf("tensor %q: element %d is %v", t.Name, first, x[0])
}

// Check verifies a model directory as Load does, without mapping the model or reading a
// weight: config.json, and the weight files (regular files, headers, offsets that tile the data,
// the shard index) holding every tensor the config implies, with its shape, in F32, F16 or BF16,
// and nothing else. It maps each file once and reads only the headers, so a command runs it
// after its resource pre-flight and refuses a damaged directory before anything large is read.
// What it cannot see is in the data: non-finite values, and a stored lm_head.weight of a tied
// model that differs from the embedding (Load refuses both).
func Check(dir string) (llama.Config, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return cfg, err
	}
	set, err := safetensors.FindSet(dir)
	if err != nil {
		return cfg, err
	}
	_, err = checkTensors(set, cfg, set.Each)
	return cfg, err
}

// checkTensors walks the weight files of set with each and checks them against cfg: every tensor
// the config implies, with its shape and a float dtype, and nothing else. It returns the file of
// a stored lm_head.weight of a tied model ("" when there is none), which only the data can check.
func checkTensors(set safetensors.Set, cfg llama.Config, each func(func(path string, t safetensors.Tensor) error) error) (string, error) {
	want := specs(cfg, cfg.Layers)
	byName := make(map[string]*tensorSpec, len(want))
	for i := range want {
		byName[want[i].name] = &want[i]
	}
	loaded := make(map[string]bool, len(want))
	tiedHead := ""
	err := each(func(path string, t safetensors.Tensor) error {
		if t.Name == "lm_head.weight" && cfg.TiedEmbeddings {
			if !slices.Equal(t.Shape, []int{cfg.VocabSize, cfg.Hidden}) {
				return fmt.Errorf("tensor %q has shape %v, want [%d %d] (tie_word_embeddings)", t.Name, t.Shape, cfg.VocabSize, cfg.Hidden)
			}
			tiedHead = path
			return checkDType(t)
		}
		spec, ok := byName[t.Name]
		if !ok {
			if ignorable(t.Name) {
				return nil
			}
			return fmt.Errorf("unexpected tensor %q (not part of a %s with this config.json)", t.Name, cfg.Architecture)
		}
		if !slices.Equal(t.Shape, spec.Shape) {
			return fmt.Errorf("tensor %q has shape %v, config.json implies %v", t.Name, t.Shape, spec.Shape)
		}
		loaded[t.Name] = true
		return checkDType(t)
	})
	if err != nil {
		return "", err
	}
	for _, s := range want {
		if !loaded[s.name] {
			where := set.Files[0]
			if set.Index != "" {
				where = set.Index
			}
			return "", fmt.Errorf("%s: tensor %q missing (config.json %s implies it)", where, s.name, cfg.Architecture)
		}
	}
	return tiedHead, nil
}

// checkDType refuses a weight that is not F32, F16 or BF16.
func checkDType(t safetensors.Tensor) error {
	if _, ok := storedTypes[t.DType]; !ok {
		return fmt.Errorf("tensor %q: dtype %s: want F32, F16 or BF16", t.Name, t.DType)
	}
	return nil
}

// sameRows checks, a row of d at a time (the matrices can be gigabytes), that t has the values of
// emb, whatever the two dtypes.
func sameRows(t, emb safetensors.Tensor, d int) error {
	x, e := make([]float32, d), make([]float32, d)
	for r := 0; r < t.NumElements()/d; r++ {
		if err := convertAt(t, r*d, x); err != nil {
			return err
		}
		if err := convertAt(emb, r*d, e); err != nil {
			return err
		}
		if !slices.Equal(x, e) {
			return fmt.Errorf("tensor %q differs from %s at row %d but tie_word_embeddings is true", t.Name, emb.Name, r)
		}
	}
	return nil
}
