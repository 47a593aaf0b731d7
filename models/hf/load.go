package hf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/models/llama"
)

// File names of a Hugging Face model directory.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
	IndexFile   = "model.safetensors.index.json"
)

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (llama.Config, error) {
	path := filepath.Join(dir, ConfigFile)
	raw, err := os.ReadFile(path)
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
	files, owner, err := weightFiles(dir)
	if err != nil {
		return nil, err
	}
	want := specs(cfg)
	byName := make(map[string]*tensorSpec, len(want))
	for i := range want {
		byName[want[i].name] = &want[i]
	}
	loaded := make(map[string]bool, len(want))
	for _, path := range files {
		if err := loadShard(path, owner, byName, loaded, m); err != nil {
			return nil, err
		}
	}
	for _, s := range want {
		if !loaded[s.name] {
			where := filepath.Join(dir, WeightsFile)
			if owner != nil {
				where = filepath.Join(dir, IndexFile)
			}
			return nil, fmt.Errorf("%s: tensor %q missing (config.json %s implies it)", where, s.name, cfg.Architecture)
		}
	}
	return m, nil
}

// loadShard converts every tensor of one file into the model. owner (from the index) says which
// file each tensor must come from; nil for a single file.
func loadShard(path string, owner map[string]string, byName map[string]*tensorSpec, loaded map[string]bool, m *llama.Model) error {
	s, err := openShard(path)
	if err != nil {
		return err
	}
	defer s.close()
	names := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := s.tensors[name]
		if owner != nil && owner[name] != filepath.Base(path) {
			return fmt.Errorf("%s: tensor %q is not listed for this file in %s", path, name, IndexFile)
		}
		spec, ok := byName[name]
		if !ok {
			if ignorable(name) {
				continue
			}
			if name == "lm_head.weight" && m.Cfg.TiedEmbeddings {
				// Some tied checkpoints store the output projection anyway; it must be the embedding.
				if err := sameAsEmbedding(s, t, m); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				continue
			}
			return fmt.Errorf("%s: unexpected tensor %q (not part of a %s with this config.json)", path, name, m.Cfg.Architecture)
		}
		if !slices.Equal(t.shape, spec.shape) {
			return fmt.Errorf("%s: tensor %q has shape %v, config.json implies %v", path, name, t.shape, spec.shape)
		}
		if loaded[name] {
			return fmt.Errorf("%s: tensor %q appears in two files", path, name)
		}
		if err := s.convert(t, spec.get(m)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		loaded[name] = true
	}
	return nil
}

func sameAsEmbedding(s *shard, t tensorInfo, m *llama.Model) error {
	c := m.Cfg
	if !slices.Equal(t.shape, []int{c.VocabSize, c.Hidden}) {
		return fmt.Errorf("tensor %q has shape %v, want [%d %d] (tie_word_embeddings)", t.name, t.shape, c.VocabSize, c.Hidden)
	}
	x := make([]float32, c.Hidden)
	for r := 0; r < c.VocabSize; r++ {
		row := t
		sz := (t.end - t.begin) / c.VocabSize
		row.begin, row.end = t.begin+r*sz, t.begin+(r+1)*sz
		if err := s.convert(row, x); err != nil {
			return err
		}
		if !slices.Equal(x, m.Embed[r*c.Hidden:(r+1)*c.Hidden]) {
			return fmt.Errorf("tensor %q differs from model.embed_tokens.weight at row %d but tie_word_embeddings is true", t.name, r)
		}
	}
	return nil
}

// weightFiles lists the safetensors files of dir: the shards of model.safetensors.index.json in
// order, with the file each tensor belongs to, or model.safetensors alone (owner nil).
func weightFiles(dir string) (files []string, owner map[string]string, err error) {
	idx := filepath.Join(dir, IndexFile)
	raw, err := os.ReadFile(idx)
	if os.IsNotExist(err) {
		p := filepath.Join(dir, WeightsFile)
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("model directory %s: neither %s nor %s", dir, WeightsFile, IndexFile)
		}
		return []string{p}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &ix); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", idx, err)
	}
	if len(ix.WeightMap) == 0 {
		return nil, nil, fmt.Errorf("%s: weight_map empty or missing", idx)
	}
	seen := map[string]bool{}
	for name, file := range ix.WeightMap {
		if file == "" || file != filepath.Base(file) || strings.HasPrefix(file, ".") {
			return nil, nil, fmt.Errorf("%s: weight_map[%q] = %q: want a file name in the directory", idx, name, file)
		}
		if !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
	}
	sort.Strings(files)
	for i, f := range files {
		files[i] = filepath.Join(dir, f)
	}
	return files, ix.WeightMap, nil
}
