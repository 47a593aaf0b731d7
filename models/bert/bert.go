// Package bert is a pure-Go forward pass of BERT-family encoders (all-MiniLM-L6-v2 is the
// supported default) read from safetensors and config.json: the per-token hidden states of any
// layer and the model's own sentence embedding, with a LinearHook on the Q, K, V and O
// projections (protocol/equality). extraction runs it behind `geloattack store extract`.
package bert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// Config is the part of a HuggingFace BERT config.json that the forward pass needs.
type Config struct {
	ModelType             string  `json:"model_type"`
	HiddenSize            int     `json:"hidden_size"`
	NumLayers             int     `json:"num_hidden_layers"`
	NumHeads              int     `json:"num_attention_heads"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositions          int     `json:"max_position_embeddings"`
	TypeVocabSize         int     `json:"type_vocab_size"`
	VocabSize             int     `json:"vocab_size"`
	LayerNormEps          float64 `json:"layer_norm_eps"`
	HiddenAct             string  `json:"hidden_act"`
	PositionEmbeddingType string  `json:"position_embedding_type"`
	NameOrPath            string  `json:"_name_or_path"`
}

// LoadConfig reads and validates a BERT config.json.
func LoadConfig(path string) (Config, error) {
	raw, err := safefile.Read(path, safefile.ModelConfig)
	if err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func (c Config) validate() error {
	if c.ModelType != "" && c.ModelType != "bert" {
		return fmt.Errorf("model_type %q: only \"bert\" encoders are supported", c.ModelType)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositions}, {"type_vocab_size", c.TypeVocabSize},
		{"vocab_size", c.VocabSize},
	} {
		if f.v <= 0 || f.v > 1<<20 {
			return fmt.Errorf("%s = %d: want 1..%d", f.name, f.v, 1<<20)
		}
	}
	if c.HiddenSize%c.NumHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumHeads)
	}
	if !(c.LayerNormEps > 0 && c.LayerNormEps < 1) {
		return fmt.Errorf("layer_norm_eps = %g: want a small positive number", c.LayerNormEps)
	}
	if c.HiddenAct != "gelu" {
		return fmt.Errorf("hidden_act %q: only \"gelu\" (exact erf) is supported", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		return fmt.Errorf("position_embedding_type %q: only \"absolute\" is supported", c.PositionEmbeddingType)
	}
	return nil
}

// Model is a BERT encoder with float32 weights. It is read-only after loading and safe for
// concurrent use by forward passes with separate workspaces.
type Model struct {
	Cfg Config
	// lib computes every matrix product.
	lib *blas.Library

	wordEmb []float32 // (vocab, h)
	posEmb  []float32 // (maxPos, h)
	typeEmb []float32 // (types, h); every token here is of type 0
	embLNW  []float32 // (h)
	embLNB  []float32 // (h)
	layers  []layerWeights
}

// layerWeights holds one post-norm transformer block; matrices keep the PyTorch nn.Linear layout
// (out, in) and are used transposed.
type layerWeights struct {
	qkvW  []float32 // (3h, h): query, key and value stacked so that one GEMM projects all three
	qkvB  []float32 // (3h)
	outW  []float32 // (h, h)
	outB  []float32 // (h)
	ln1W  []float32 // (h)
	ln1B  []float32 // (h)
	ffnW1 []float32 // (ffn, h)
	ffnB1 []float32 // (ffn)
	ffnW2 []float32 // (h, ffn)
	ffnB2 []float32 // (h)
	ln2W  []float32 // (h)
	ln2B  []float32 // (h)
}

// weightFile finds the one *.safetensors file of a model directory.
func weightFile(dir string) (string, error) {
	for _, name := range []string{"model.safetensors", "model.fp16.safetensors"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("model directory %s: no *.safetensors file", dir)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("model directory %s: %d *.safetensors files (%s), want one", dir, len(matches), strings.Join(matches, ", "))
}

// LoadModel reads config.json and the safetensors weights (F32, F16 or BF16; converted to float32)
// of a BERT encoder from dir. Tensor names may carry a "bert." prefix (checkpoints saved from
// task models). lib computes the matrix products; nil means blas.Default().
func LoadModel(dir string, lib *blas.Library) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	path, err := weightFile(dir)
	if err != nil {
		return nil, err
	}
	st, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	m, err := newModel(cfg, st, lib)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// newModel copies the weights of Tensors(cfg) out of a parsed safetensors file, checking every
// shape and refusing weights that are not finite.
func newModel(cfg Config, st *safetensors.File, lib *blas.Library) (*Model, error) {
	if lib == nil {
		lib = blas.Default()
	}
	prefix := ""
	if _, ok := st.Tensor("embeddings.word_embeddings.weight"); !ok {
		if _, ok := st.Tensor("bert.embeddings.word_embeddings.weight"); ok {
			prefix = "bert."
		}
	}
	m := &Model{Cfg: cfg, lib: lib, layers: make([]layerWeights, cfg.NumLayers)}
	for _, s := range Tensors(cfg) {
		name := prefix + s.Name
		t, ok := st.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("tensor %q missing", name)
		}
		if !slices.Equal(t.Shape, s.Shape) {
			return nil, fmt.Errorf("tensor %q has shape %v, config.json implies %v", name, t.Shape, s.Shape)
		}
		dst := m.weightOf(s)
		if err := t.Float32s(dst); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		if i := numfmt.FirstNonFinite(dst); i >= 0 {
			return nil, fmt.Errorf("tensor %q: element %d is %v", name, i, dst[i])
		}
	}
	return m, nil
}

// Hidden is the width of a hidden state (d_model).
func (m *Model) Hidden() int { return m.Cfg.HiddenSize }

// NumLayers is the number of transformer blocks; valid layers for Forward are 0..NumLayers.
func (m *Model) NumLayers() int { return m.Cfg.NumLayers }

// Lib is the BLAS library that computes the model's matrix products.
func (m *Model) Lib() *blas.Library { return m.lib }

// MaxLen is the longest sequence the position embeddings cover.
func (m *Model) MaxLen() int { return m.Cfg.MaxPositions }
