// Package hf reads and writes Llama-family decoders as Hugging Face model directories:
// config.json, and model.safetensors or shards listed by model.safetensors.index.json, with BF16,
// F16 or F32 tensors. Files are read through mmap and each tensor is converted to float32 straight
// into the model, so loading holds the float32 model (4 bytes per parameter) and no second copy of
// the file; the mapping is released before Load returns. Everything the forward pass of
// models/llama does not implement is refused with the key or tensor and the file named.
package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/llama"
)

// Architectures this package reads (config.json "architectures").
var Architectures = []string{"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}

// Family is the short name of an architecture: llama, mistral, qwen2 or qwen3.
func Family(arch string) string {
	switch arch {
	case "LlamaForCausalLM":
		return "llama"
	case "MistralForCausalLM":
		return "mistral"
	case "Qwen2ForCausalLM":
		return "qwen2"
	case "Qwen3ForCausalLM":
		return "qwen3"
	}
	return ""
}

// IsDecoderDir reports whether dir/config.json names a causal language model (one of
// Architectures, or any other *ForCausalLM or *LMHeadModel class, which Load then refuses by name),
// so that callers can choose between this package and an encoder loader. Any read error answers
// false.
func IsDecoderDir(dir string) bool {
	raw, err := safefile.Read(filepath.Join(dir, ConfigFile), safefile.ModelConfig)
	if err != nil {
		return false
	}
	var c struct {
		Architectures []string `json:"architectures"`
	}
	if json.Unmarshal(raw, &c) != nil || len(c.Architectures) != 1 {
		return false
	}
	a := c.Architectures[0]
	return slices.Contains(Architectures, a) || strings.HasSuffix(a, "ForCausalLM") || strings.HasSuffix(a, "LMHeadModel")
}

// moeKeys are config keys of mixture-of-experts variants; any non-zero value is refused.
var moeKeys = []string{"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "n_routed_experts", "decoder_sparse_step"}

// ParseConfig reads a config.json of one of Architectures into a llama.Config. Errors name the
// key; the caller adds the file.
func ParseConfig(raw []byte) (llama.Config, error) {
	var keys configKeys
	if err := json.Unmarshal(raw, &keys); err != nil {
		return llama.Config{}, err
	}
	arch, err := keys.architecture()
	if err != nil {
		return llama.Config{}, err
	}
	c := llama.Config{Architecture: arch, RopeTheta: 10000}
	for _, step := range []func(*llama.Config) error{keys.dims, keys.features, keys.refuseMoE, keys.window, keys.ropeScaling} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// configKeys are config.json's top-level keys, each value as written; ParseConfig reads them in
// steps, each a method below.
type configKeys map[string]json.RawMessage

// get decodes key into dst and says whether it was present; a JSON null counts as absent.
func (k configKeys) get(key string, dst any) (bool, error) {
	v, ok := k[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return false, nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return true, fmt.Errorf("%s: %w", key, err)
	}
	return true, nil
}

// architecture is the one architecture config.json names, among those implemented.
func (k configKeys) architecture() (string, error) {
	var archs []string
	if _, err := k.get("architectures", &archs); err != nil {
		return "", err
	}
	if len(archs) != 1 {
		return "", fmt.Errorf("architectures = %q: want exactly one of %q", archs, Architectures)
	}
	if !slices.Contains(Architectures, archs[0]) {
		return "", fmt.Errorf("architectures = %q: unknown architecture (want one of %q)", archs[0], Architectures)
	}
	return archs[0], nil
}

// dims reads the sizes (all required but the kv heads, which default to the heads, and head_dim,
// which defaults to hidden / heads), the norm's epsilon and the rotary base.
func (k configKeys) dims(c *llama.Config) error {
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"vocab_size", &c.VocabSize}, {"hidden_size", &c.Hidden}, {"intermediate_size", &c.Intermediate},
		{"num_hidden_layers", &c.Layers}, {"num_attention_heads", &c.Heads},
		{"max_position_embeddings", &c.MaxPositions},
	} {
		ok, err := k.get(f.key, f.dst)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s missing", f.key)
		}
	}
	if ok, err := k.get("rms_norm_eps", &c.RMSEps); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("rms_norm_eps missing")
		}
		return err
	}
	if _, err := k.get("rope_theta", &c.RopeTheta); err != nil {
		return err
	}
	c.KVHeads = c.Heads
	if _, err := k.get("num_key_value_heads", &c.KVHeads); err != nil {
		return err
	}
	if c.Hidden <= 0 || c.Heads <= 0 {
		return fmt.Errorf("hidden_size = %d, num_attention_heads = %d: want positive", c.Hidden, c.Heads)
	}
	hasHD, err := k.get("head_dim", &c.HeadDim)
	if err != nil {
		return err
	}
	if !hasHD {
		if c.Hidden%c.Heads != 0 {
			return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d (and head_dim is absent)", c.Hidden, c.Heads)
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	return nil
}

// features reads the tied output, the activation, the biases and q/k norm, refusing what the
// forward pass does not implement.
func (k configKeys) features(c *llama.Config) error {
	if _, err := k.get("tie_word_embeddings", &c.TiedEmbeddings); err != nil {
		return err
	}
	act := "silu"
	if _, err := k.get("hidden_act", &act); err != nil {
		return err
	}
	if act != "silu" {
		return fmt.Errorf("hidden_act %q: only \"silu\" (SwiGLU) is implemented", act)
	}
	var mlpBias bool
	if _, err := k.get("mlp_bias", &mlpBias); err != nil {
		return err
	}
	if mlpBias {
		return fmt.Errorf("mlp_bias = true: MLP biases are not implemented")
	}
	switch c.Architecture {
	case "Qwen2ForCausalLM":
		// Qwen2 always has q/k/v biases and no attention_bias key.
		c.QKVBias = true
	case "Qwen3ForCausalLM":
		c.QKNorm = true
		fallthrough
	default:
		if _, err := k.get("attention_bias", &c.QKVBias); err != nil {
			return err
		}
		if c.QKVBias && c.Architecture != "Qwen2ForCausalLM" {
			// Llama's attention_bias also puts a bias on o_proj, which the forward pass lacks.
			return fmt.Errorf("attention_bias = true: attention output biases are not implemented")
		}
	}
	return nil
}

// refuseMoE refuses a mixture-of-experts configuration.
func (k configKeys) refuseMoE(*llama.Config) error {
	for _, key := range moeKeys {
		var v float64
		if _, err := k.get(key, &v); err != nil {
			return err
		}
		if v != 0 {
			return fmt.Errorf("%s = %v: mixture-of-experts models are not supported", key, v)
		}
	}
	return nil
}

// window reads the sliding window: Qwen's is refused when used, Mistral v0.1's limits sequences.
func (k configKeys) window(c *llama.Config) error {
	var window int
	if _, err := k.get("sliding_window", &window); err != nil {
		return err
	}
	if c.Architecture == "Qwen2ForCausalLM" || c.Architecture == "Qwen3ForCausalLM" {
		var use bool
		if _, err := k.get("use_sliding_window", &use); err != nil {
			return err
		}
		if use {
			return fmt.Errorf("use_sliding_window = true: sliding-window attention is not implemented")
		}
	} else if window > 0 {
		// Mistral v0.1: a window at least as long as the sequence masks nothing, so sequences are
		// limited to it (Config.MaxLen) instead of refusing the model.
		c.SlidingWindow = window
	}
	return nil
}

// ropeScaling reads rope_scaling when present.
func (k configKeys) ropeScaling(c *llama.Config) error {
	rs, ok := k["rope_scaling"]
	if !ok || bytes.Equal(bytes.TrimSpace(rs), []byte("null")) {
		return nil
	}
	r, err := parseRopeScaling(rs)
	if err != nil {
		return err
	}
	c.Rope = r
	return nil
}

func parseRopeScaling(raw json.RawMessage) (llama.RopeScaling, error) {
	var r struct {
		RopeType string   `json:"rope_type"`
		Type     string   `json:"type"`
		Factor   *float64 `json:"factor"`
		Low      float64  `json:"low_freq_factor"`
		High     float64  `json:"high_freq_factor"`
		Orig     int      `json:"original_max_position_embeddings"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return llama.RopeScaling{}, fmt.Errorf("rope_scaling: %w", err)
	}
	kind := r.RopeType
	if kind == "" {
		kind = r.Type
	}
	out := llama.RopeScaling{LowFreqFactor: r.Low, HighFreqFactor: r.High, OriginalMaxPositions: r.Orig}
	if r.Factor != nil {
		out.Factor = *r.Factor
	}
	switch kind {
	case "default":
		return llama.RopeScaling{}, nil
	case llama.RopeLinear, llama.RopeLlama3:
		out.Kind = kind
		if r.Factor == nil || math.IsNaN(out.Factor) {
			return out, fmt.Errorf("rope_scaling.factor missing")
		}
		return out, nil
	case "":
		return out, fmt.Errorf("rope_scaling.rope_type missing")
	}
	return out, fmt.Errorf("rope_scaling.rope_type %q: not implemented (want default, linear or llama3)", kind)
}

// ModelName is what a decoder directory calls its model: config.json's _name_or_path, else the
// directory's name. files reads config.json as the loader does, through links (a Hugging Face
// cache's snapshot holds links to its blobs); nil is the door without a memory of inputs. Stores
// record it (meta.json's model) and checks compare it.
func ModelName(files *safefile.Files, dir string) string {
	if raw, err := files.Read(filepath.Join(dir, ConfigFile), safefile.ModelConfig); err == nil {
		var c struct {
			Name string `json:"_name_or_path"`
		}
		if json.Unmarshal(raw, &c) == nil && c.Name != "" {
			return c.Name
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return filepath.Base(abs)
	}
	return dir
}
