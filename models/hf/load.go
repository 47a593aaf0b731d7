package hf

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safetensors"
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

// tensorSpec is one weight of a config: its Hugging Face name, its shape, and where a model keeps it.
type tensorSpec struct {
	name  string
	shape []int
	get   func(m *llama.Model) []float32
	gain  bool // an RMSNorm gain (llama.Random draws it around 1)
}

// specs lists every tensor of cfg in Hugging Face's names and file order, which is also the order
// in which llama.Random draws them.
func specs(c llama.Config) []tensorSpec {
	d, f, hd, q, kv := c.Hidden, c.Intermediate, c.HeadDim, c.QDim(), c.KVDim()
	out := []tensorSpec{{"model.embed_tokens.weight", []int{c.VocabSize, d}, func(m *llama.Model) []float32 { return m.Embed }, false}}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		blk := func(get func(b *llama.Block) []float32) func(m *llama.Model) []float32 {
			return func(m *llama.Model) []float32 { return get(&m.Blocks[i]) }
		}
		add := func(name string, gain bool, get func(b *llama.Block) []float32, shape ...int) {
			out = append(out, tensorSpec{p + name, shape, blk(get), gain})
		}
		add("input_layernorm.weight", true, func(b *llama.Block) []float32 { return b.AttnNorm }, d)
		add("self_attn.q_proj.weight", false, (*llama.Block).Q, q, d)
		add("self_attn.k_proj.weight", false, (*llama.Block).K, kv, d)
		add("self_attn.v_proj.weight", false, (*llama.Block).V, kv, d)
		if c.QKVBias {
			add("self_attn.q_proj.bias", false, (*llama.Block).QBias, q)
			add("self_attn.k_proj.bias", false, (*llama.Block).KBias, kv)
			add("self_attn.v_proj.bias", false, (*llama.Block).VBias, kv)
		}
		if c.QKNorm {
			add("self_attn.q_norm.weight", true, func(b *llama.Block) []float32 { return b.QNorm }, hd)
			add("self_attn.k_norm.weight", true, func(b *llama.Block) []float32 { return b.KNorm }, hd)
		}
		add("self_attn.o_proj.weight", false, func(b *llama.Block) []float32 { return b.O }, d, q)
		add("post_attention_layernorm.weight", true, func(b *llama.Block) []float32 { return b.MLPNorm }, d)
		add("mlp.gate_proj.weight", false, (*llama.Block).Gate, f, d)
		add("mlp.up_proj.weight", false, (*llama.Block).Up, f, d)
		add("mlp.down_proj.weight", false, func(b *llama.Block) []float32 { return b.Down }, d, f)
	}
	out = append(out, tensorSpec{"model.norm.weight", []int{d}, func(m *llama.Model) []float32 { return m.Norm }, true})
	if !c.TiedEmbeddings {
		out = append(out, tensorSpec{"lm_head.weight", []int{c.VocabSize, d}, func(m *llama.Model) []float32 { return m.LMHead }, false})
	}
	return out
}

// ignorable reports tensors that checkpoints carry but that the forward pass recomputes: the
// rotary inverse frequencies some Llama conversions saved as buffers.
func ignorable(name string) bool {
	return strings.HasSuffix(name, ".self_attn.rotary_emb.inv_freq")
}

// Load reads a model directory: config.json and the weights of model.safetensors or of the shards
// that model.safetensors.index.json lists. lib computes the matrix products (nil: blas.Default()).
// Peak memory is the float32 model plus one mapped shard (page cache, not heap).
func Load(dir string, lib *blas.Library) (*llama.Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	m, err := llama.New(cfg, lib)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	if err := readWeights(dir, cfg, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Check verifies a model directory as Load does, without allocating the model or converting a
// weight: config.json, and the weight files (regular files, headers, offsets that tile the data,
// the shard index) holding every tensor the config implies, with its shape, and nothing else. It
// maps each file once and reads only the headers, so a command runs it before its resource
// pre-flight and refuses a damaged directory before anything large is allocated. What it cannot
// see is in the data: non-finite values, and a stored lm_head.weight of a tied model that differs
// from the embedding (Load refuses both).
func Check(dir string) (llama.Config, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return cfg, err
	}
	return cfg, readWeights(dir, cfg, nil)
}

// readWeights walks the weight files of dir for a model of cfg, converting every tensor into m,
// or with m nil only checking names and shapes.
func readWeights(dir string, cfg llama.Config, m *llama.Model) error {
	set, err := safetensors.FindSet(dir)
	if err != nil {
		return err
	}
	want := specs(cfg)
	byName := make(map[string]*tensorSpec, len(want))
	for i := range want {
		byName[want[i].name] = &want[i]
	}
	loaded := make(map[string]bool, len(want))
	tiedHead := "" // the file of a stored lm_head.weight of a tied model
	err = set.Each(func(path string, t safetensors.Tensor) error {
		if t.Name == "lm_head.weight" && cfg.TiedEmbeddings {
			if !slices.Equal(t.Shape, []int{cfg.VocabSize, cfg.Hidden}) {
				return fmt.Errorf("tensor %q has shape %v, want [%d %d] (tie_word_embeddings)", t.Name, t.Shape, cfg.VocabSize, cfg.Hidden)
			}
			tiedHead = path
			return nil
		}
		ok, err := loadTensor(t, byName, cfg, m)
		loaded[t.Name] = ok
		return err
	})
	if err != nil {
		return err
	}
	for _, s := range want {
		if !loaded[s.name] {
			where := set.Files[0]
			if set.Index != "" {
				where = set.Index
			}
			return fmt.Errorf("%s: tensor %q missing (config.json %s implies it)", where, s.name, cfg.Architecture)
		}
	}
	if tiedHead != "" && m != nil {
		// Some tied checkpoints store the output projection anyway; it must be the embedding,
		// which is only known once every file is read (lm_head sorts before model.*).
		if err := checkTiedHead(tiedHead, m); err != nil {
			return err
		}
	}
	return nil
}

// checkTiedHead checks that the lm_head.weight in path equals the loaded embedding.
func checkTiedHead(path string, m *llama.Model) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	t, _ := f.Tensor("lm_head.weight")
	if err := sameAsEmbedding(t, m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// loadTensor converts t into the model (m nil: only checks it) and reports whether it is one of
// the model's weights (false for a tensor the forward pass has no use for, checked and skipped). The set has already
// checked that no tensor comes from two files.
func loadTensor(t safetensors.Tensor, byName map[string]*tensorSpec, cfg llama.Config, m *llama.Model) (bool, error) {
	spec, ok := byName[t.Name]
	if !ok {
		if ignorable(t.Name) {
			return false, nil
		}
		return false, fmt.Errorf("unexpected tensor %q (not part of a %s with this config.json)", t.Name, cfg.Architecture)
	}
	if !slices.Equal(t.Shape, spec.shape) {
		return false, fmt.Errorf("tensor %q has shape %v, config.json implies %v", t.Name, t.Shape, spec.shape)
	}
	if m == nil {
		return true, nil
	}
	return true, convert(t, spec.get(m))
}

// sameAsEmbedding checks, a row at a time (the matrix can be gigabytes), that t equals the
// model's embedding.
func sameAsEmbedding(t safetensors.Tensor, m *llama.Model) error {
	c := m.Cfg
	if !slices.Equal(t.Shape, []int{c.VocabSize, c.Hidden}) {
		return fmt.Errorf("tensor %q has shape %v, want [%d %d] (tie_word_embeddings)", t.Name, t.Shape, c.VocabSize, c.Hidden)
	}
	x := make([]float32, c.Hidden)
	for r := 0; r < c.VocabSize; r++ {
		if err := convertAt(t, r*c.Hidden, x); err != nil {
			return err
		}
		if !slices.Equal(x, m.Embed[r*c.Hidden:(r+1)*c.Hidden]) {
			return fmt.Errorf("tensor %q differs from model.embed_tokens.weight at row %d but tie_word_embeddings is true", t.Name, r)
		}
	}
	return nil
}
