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
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return llama.Config{}, err
	}
	get := func(key string, dst any) (bool, error) {
		v, ok := keys[key]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return false, nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return true, fmt.Errorf("%s: %w", key, err)
		}
		return true, nil
	}
	var archs []string
	if _, err := get("architectures", &archs); err != nil {
		return llama.Config{}, err
	}
	if len(archs) != 1 {
		return llama.Config{}, fmt.Errorf("architectures = %q: want exactly one of %q", archs, Architectures)
	}
	arch := archs[0]
	if !slices.Contains(Architectures, arch) {
		return llama.Config{}, fmt.Errorf("architectures = %q: unknown architecture (want one of %q)", arch, Architectures)
	}
	c := llama.Config{Architecture: arch, RopeTheta: 10000}
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"vocab_size", &c.VocabSize}, {"hidden_size", &c.Hidden}, {"intermediate_size", &c.Intermediate},
		{"num_hidden_layers", &c.Layers}, {"num_attention_heads", &c.Heads},
		{"max_position_embeddings", &c.MaxPositions},
	} {
		ok, err := get(f.key, f.dst)
		if err != nil {
			return c, err
		}
		if !ok {
			return c, fmt.Errorf("%s missing", f.key)
		}
	}
	if ok, err := get("rms_norm_eps", &c.RMSEps); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("rms_norm_eps missing")
		}
		return c, err
	}
	if _, err := get("rope_theta", &c.RopeTheta); err != nil {
		return c, err
	}
	c.KVHeads = c.Heads
	if _, err := get("num_key_value_heads", &c.KVHeads); err != nil {
		return c, err
	}
	if c.Hidden <= 0 || c.Heads <= 0 {
		return c, fmt.Errorf("hidden_size = %d, num_attention_heads = %d: want positive", c.Hidden, c.Heads)
	}
	hasHD, err := get("head_dim", &c.HeadDim)
	if err != nil {
		return c, err
	}
	if !hasHD {
		if c.Hidden%c.Heads != 0 {
			return c, fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d (and head_dim is absent)", c.Hidden, c.Heads)
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	if _, err := get("tie_word_embeddings", &c.TiedEmbeddings); err != nil {
		return c, err
	}
	act := "silu"
	if _, err := get("hidden_act", &act); err != nil {
		return c, err
	}
	if act != "silu" {
		return c, fmt.Errorf("hidden_act %q: only \"silu\" (SwiGLU) is implemented", act)
	}
	var mlpBias bool
	if _, err := get("mlp_bias", &mlpBias); err != nil {
		return c, err
	}
	if mlpBias {
		return c, fmt.Errorf("mlp_bias = true: MLP biases are not implemented")
	}
	switch arch {
	case "Qwen2ForCausalLM":
		// Qwen2 always has q/k/v biases and no attention_bias key.
		c.QKVBias = true
	case "Qwen3ForCausalLM":
		c.QKNorm = true
		fallthrough
	default:
		if _, err := get("attention_bias", &c.QKVBias); err != nil {
			return c, err
		}
		if c.QKVBias && arch != "Qwen2ForCausalLM" {
			// Llama's attention_bias also puts a bias on o_proj, which the forward pass lacks.
			return c, fmt.Errorf("attention_bias = true: attention output biases are not implemented")
		}
	}
	for _, k := range moeKeys {
		var v float64
		if _, err := get(k, &v); err != nil {
			return c, err
		}
		if v != 0 {
			return c, fmt.Errorf("%s = %v: mixture-of-experts models are not supported", k, v)
		}
	}
	var window int
	if _, err := get("sliding_window", &window); err != nil {
		return c, err
	}
	if arch == "Qwen2ForCausalLM" || arch == "Qwen3ForCausalLM" {
		var use bool
		if _, err := get("use_sliding_window", &use); err != nil {
			return c, err
		}
		if use {
			return c, fmt.Errorf("use_sliding_window = true: sliding-window attention is not implemented")
		}
	} else if window > 0 {
		// Mistral v0.1: a window at least as long as the sequence masks nothing, so sequences are
		// limited to it (Config.MaxLen) instead of refusing the model.
		c.SlidingWindow = window
	}
	if rs, ok := keys["rope_scaling"]; ok && !bytes.Equal(bytes.TrimSpace(rs), []byte("null")) {
		r, err := parseRopeScaling(rs)
		if err != nil {
			return c, err
		}
		c.Rope = r
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
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
