package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gelo-research/geloattack/models/hf"
)

// victimModel is the decoder directory of the decoder cases (issue 26).
const victimModel = "victim-model"

// withDecoder writes a small random-init Llama-2-shaped directory and a texts file, then lets edit
// damage the directory.
func withDecoder(edit func(t *testing.T, dir string)) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		md := filepath.Join(dir, victimModel)
		if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 1, DType: hf.F32, Out: md}); err != nil {
			t.Fatal(err)
		}
		hWriteFile(t, filepath.Join(dir, "texts.txt"), []byte("one text\nanother text\n"))
		if edit != nil {
			edit(t, md)
		}
	}
}

// editDecoderConfig changes config.json keys (nil deletes).
func editDecoderConfig(kv map[string]any) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, hf.ConfigFile)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		for k, v := range kv {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		raw, _ = json.Marshal(c)
		hWriteFile(t, p, raw)
	}
}

// editDecoderHeader rewrites model.safetensors' JSON header, keeping the data.
func editDecoderHeader(edit func(h map[string]any)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, hf.WeightsFile)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(raw)
		var h map[string]any
		if err := json.Unmarshal(raw[8:8+n], &h); err != nil {
			t.Fatal(err)
		}
		edit(h)
		js, _ := json.Marshal(h)
		out := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
		hWriteFile(t, p, append(out, raw[8+n:]...))
	}
}

// decoderHostileCases are the decoder directories `store extract` and `model init` must refuse.
func decoderHostileCases() []hostileCase {
	extract := []string{"store", "extract", "-model", victimModel, "-texts", "texts.txt", "-out", victimStore, "-layer", "1", "-quiet"}
	weights := victimModel + "/" + hf.WeightsFile
	config := victimModel + "/" + hf.ConfigFile
	return []hostileCase{
		{name: "decoder: truncated shard", setup: withDecoder(func(t *testing.T, dir string) {
			p := filepath.Join(dir, hf.WeightsFile)
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}), args: extract, want: []string{weights, "truncated", "data_offsets"}},
		{name: "decoder: overlapping header offsets", setup: withDecoder(editDecoderHeader(func(h map[string]any) {
			e := h["model.embed_tokens.weight"].(map[string]any)["data_offsets"].([]any)
			h["model.norm.weight"].(map[string]any)["data_offsets"] = []any{e[0], e[0].(float64) + 256}
		})), args: extract, want: []string{weights, "overlap", "model.norm.weight"}},
		// Renamed to a tensor the loader skips: a deleted entry would leave its bytes to no tensor.
		{name: "decoder: missing tensor", setup: withDecoder(editDecoderHeader(func(h map[string]any) {
			h["model.layers.1.self_attn.rotary_emb.inv_freq"] = h["model.layers.1.mlp.up_proj.weight"]
			delete(h, "model.layers.1.mlp.up_proj.weight")
		})), args: extract, want: []string{victimModel, "model.layers.1.mlp.up_proj.weight", "missing"}},
		{name: "decoder: bytes of no tensor", setup: withDecoder(editDecoderHeader(func(h map[string]any) {
			delete(h, "model.layers.1.mlp.up_proj.weight")
		})), args: extract, want: []string{weights, "belong to no tensor"}},
		{name: "decoder: head count does not divide the width", setup: withDecoder(editDecoderConfig(map[string]any{
			"num_attention_heads": 3, "num_key_value_heads": 3,
		})), args: extract, want: []string{config, "num_attention_heads"}},
		{name: "decoder: unknown architecture", setup: withDecoder(editDecoderConfig(map[string]any{
			"architectures": []string{"FalconForCausalLM"}, "model_type": "falcon",
		})), args: extract, want: []string{config, "architectures", "FalconForCausalLM"}},
		{name: "decoder: yarn rope scaling", setup: withDecoder(editDecoderConfig(map[string]any{
			"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0},
		})), args: extract, want: []string{config, "rope_scaling.rope_type", "yarn"}},
		{name: "decoder: mixture of experts", setup: withDecoder(editDecoderConfig(map[string]any{"num_local_experts": 8})),
			args: extract, want: []string{config, "num_local_experts"}},
		{name: "decoder: -point bogus", setup: withDecoder(nil), args: append(extract, "-point", "bogus"), want: []string{"-point"}},
		{name: "model init -like nosuch", args: []string{"model", "init", "-like", "nosuch", "-out", victimModel}, want: []string{"-like", "nosuch"}},
		{name: "model init -hidden 7", args: []string{"model", "init", "-like", "llama2-7b", "-hidden", "7", "-out", victimModel}, want: []string{"-hidden 7"}},
	}
}
