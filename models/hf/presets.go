package hf

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// presets are the public config.json files of the models `model init -like` imitates (the
// architecture's published facts; no weights). llama3-8b is Llama 3.1 8B, whose config carries
// the llama3 rope scaling; mistral-7b is Mistral 7B v0.3 (no sliding window).
var presets = map[string]string{
	"llama2-7b": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 1, "eos_token_id": 2,
		"hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
		"max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
		"pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
		"tie_word_embeddings": false, "torch_dtype": "float16", "vocab_size": 32000}`,
	"llama3-8b": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": false, "attention_dropout": 0.0,
		"bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
		"intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false, "num_attention_heads": 32,
		"num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
		"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
		"rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}`,
	"qwen3-8b": `{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false, "attention_dropout": 0.0,
		"bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
		"initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36,
		"num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
		"rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": false,
		"torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}`,
	"mistral-7b": `{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "attention_dropout": 0.0,
		"bos_token_id": 1, "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
		"initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
		"num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
		"rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
		"vocab_size": 32768}`,
	"qwen2-7b": `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0,
		"bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
		"initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
		"num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
		"rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
		"use_cache": true, "use_sliding_window": false, "vocab_size": 152064}`,
}

// Presets lists the names `-like` accepts besides a file.
func Presets() []string {
	out := make([]string, 0, len(presets))
	for k := range presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LikeConfig returns the config.json of a preset, or of a file when like is not a preset name.
func LikeConfig(like string) (map[string]any, error) { return likeConfig(nil, like) }

// likeConfig is LikeConfig reading the file through files.
func likeConfig(files *safefile.Files, like string) (map[string]any, error) {
	raw, ok := presets[like]
	src := "preset " + like
	if !ok {
		b, err := files.Read(like, safefile.ModelConfig)
		if err != nil {
			return nil, fmt.Errorf("-like %q: neither a preset (%v) nor a readable file: %w", like, Presets(), err)
		}
		raw, src = string(b), like
	}
	c, err := unmarshalConfig([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if _, err := ParseConfig([]byte(raw)); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return c, nil
}

// Cut shrinks a config: layers, hidden width and vocabulary when > 0. A narrower width keeps the
// head width where it divides the new width and leaves at least two key/value groups (else
// halves it, down to 8), so that heads = hidden/head_dim, keeps the ratio of query to key/value
// heads where it can, and scales intermediate_size by the same factor as the width (rounded up to
// a multiple of 8).
func Cut(config map[string]any, layers, hidden, vocab int) (map[string]any, error) {
	raw, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(config))
	for k, v := range config {
		out[k] = v
	}
	if layers > 0 {
		out["num_hidden_layers"] = layers
		if _, ok := out["max_window_layers"]; ok {
			out["max_window_layers"] = layers
		}
	}
	if vocab > 0 {
		out["vocab_size"] = vocab
	}
	if hidden > 0 && hidden != c.Hidden {
		// Narrow widths get narrower heads rather than fewer, down to 8 wide, so that a cut
		// grouped-query model keeps at least two key/value heads of its group size.
		ratio := c.Heads / c.KVHeads
		want := min(c.Heads, 2*ratio)
		hd := c.HeadDim
		for hd > 2 && (hidden%hd != 0 || hd > hidden || (hidden/hd < want && hd > 8)) {
			hd /= 2
		}
		if hidden%hd != 0 || hd%2 != 0 {
			return nil, fmt.Errorf("-hidden %d: no even head width divides it (head_dim %d)", hidden, c.HeadDim)
		}
		heads := hidden / hd
		kv := max(1, heads/ratio)
		for heads%kv != 0 {
			kv--
		}
		f := (c.Intermediate*hidden/c.Hidden + 7) / 8 * 8
		out["hidden_size"], out["num_attention_heads"], out["num_key_value_heads"] = hidden, heads, kv
		out["intermediate_size"] = f
		if _, ok := out["head_dim"]; ok || hd != hidden/heads {
			out["head_dim"] = hd
		}
	}
	js, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if _, err := ParseConfig(js); err != nil {
		return nil, fmt.Errorf("cut config: %w", err)
	}
	return out, nil
}
