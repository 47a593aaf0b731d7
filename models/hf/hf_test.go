package hf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/models/llama"
)

func smallConfig() map[string]any {
	return map[string]any{
		"architectures": []any{"Qwen2ForCausalLM"}, "hidden_size": 32, "intermediate_size": 48,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
		"rope_theta": 1e6, "tie_word_embeddings": false, "vocab_size": 50, "max_position_embeddings": 64,
	}
}

func writeModel(t *testing.T, config map[string]any, dtype string) (string, *llama.Model) {
	t.Helper()
	raw, _ := json.Marshal(config)
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.Random(cfg, 1, 0.1, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Save(dir, config, m, dtype); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// Every weight survives Save and Load exactly in F32 and as the nearest bfloat16 or binary16 in
// BF16 and F16.
func TestRoundTrip(t *testing.T) {
	for _, dtype := range []string{F32, BF16, F16} {
		dir, m := writeModel(t, smallConfig(), dtype)
		got, err := Load(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Cfg != m.Cfg {
			t.Fatalf("%s: config %+v, want %+v", dtype, got.Cfg, m.Cfg)
		}
		for _, sp := range specs(m.Cfg, m.Cfg.Layers) {
			want, have := read(t, m, sp.Part, sp.Block), read(t, got, sp.Part, sp.Block)
			for j, v := range want {
				w := v
				switch dtype {
				case BF16:
					w = numfmt.RoundBF16(v)
				case F16:
					w = numfmt.RoundF16(v)
				}
				if have[j] != w {
					t.Fatalf("%s: %s[%d] = %v, want %v", dtype, sp.name, j, have[j], w)
				}
			}
		}
	}
}

// A model split over shards with an index loads as the single file does.
func TestShardedLoad(t *testing.T) {
	dir, m := writeModel(t, smallConfig(), F32)
	// Re-save the tensors as two shards by name parity.
	all, err := ReadTensors(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(mapsKeys(all))
	weightMap := map[string]string{}
	parts := [2][]string{}
	for i, n := range names {
		parts[i%2] = append(parts[i%2], n)
	}
	for p, ns := range parts {
		file := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[p]
		writeTensors(t, filepath.Join(dir, file), ns, all)
		for _, n := range ns {
			weightMap[n] = file
		}
	}
	os.Remove(filepath.Join(dir, WeightsFile))
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
	got, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(read(t, got, llama.DownProj, 1), read(t, m, llama.DownProj, 1)) || !slices.Equal(read(t, got, llama.LMHead, -1), read(t, m, llama.LMHead, -1)) {
		t.Fatal("sharded load differs")
	}
	// A tensor in a shard the index does not list it under is refused naming both.
	weightMap[names[0]] = "model-00002-of-00002.safetensors"
	idx, _ = json.Marshal(map[string]any{"weight_map": weightMap})
	os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
	_, err = Load(dir, nil)
	wantErr(t, err, "model-00001-of-00002.safetensors", names[0], IndexFile)
}

// read is one weight of m as float32.
func read(t *testing.T, m *llama.Model, p llama.Part, blk int) []float32 {
	t.Helper()
	rows, cols, err := m.Shape(p, blk)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, rows*cols)
	if err := m.Read(p, blk, x); err != nil {
		t.Fatal(err)
	}
	return x
}

func mapsKeys(m map[string]Tensor) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func writeTensors(t *testing.T, path string, names []string, all map[string]Tensor) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shapes := make([][]int, len(names))
	for i, n := range names {
		shapes[i] = all[n].Shape
	}
	if err := writeSafetensors(f, names, shapes, func(i int) ([]float32, error) { return all[names[i]].Data, nil }, F32); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one naming %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not name %q", err, p)
		}
	}
}

// rewriteHeader replaces the JSON header of a safetensors file, keeping the data.
func rewriteHeader(t *testing.T, path string, edit func(h map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(path)
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
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	out = append(append(out, js...), raw[8+n:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Hostile weight files are refused naming the file and the tensor or field, never with a panic.
func TestHostileWeights(t *testing.T) {
	const emb = "model.embed_tokens.weight"
	for _, c := range []struct {
		name  string
		edit  func(t *testing.T, path string)
		parts []string
	}{
		{"truncated", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()-10)
		}, []string{"truncated", "data_offsets"}},
		{"truncated header", func(t *testing.T, path string) { os.Truncate(path, 100) }, []string{"header length"}},
		{"tiny", func(t *testing.T, path string) { os.Truncate(path, 5) }, []string{"truncated"}},
		{"overlap", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) {
				e := h["model.norm.weight"].(map[string]any)
				o := h[emb].(map[string]any)["data_offsets"].([]any)
				b := o[0].(float64)
				e["data_offsets"] = []any{b, b + 32*4}
			})
		}, []string{"overlap", "model.norm.weight"}},
		{"out of range", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) {
				e := h["model.norm.weight"].(map[string]any)
				e["data_offsets"] = []any{1e12, 1e12 + 128}
			})
		}, []string{"model.norm.weight", "data_offsets"}},
		{"size mismatch", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) { h["model.norm.weight"].(map[string]any)["shape"] = []any{31} })
		}, []string{"model.norm.weight", "shape"}},
		{"shape mismatch", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) { h[emb].(map[string]any)["shape"] = []any{32, 50} })
		}, []string{emb, "shape [32 50]", "config.json implies [50 32]"}},
		{"missing", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) {
				h["model.layers.1.mlp.dummy.weight"] = h["model.layers.1.self_attn.k_proj.bias"]
				delete(h, "model.layers.1.self_attn.k_proj.bias")
			})
		}, []string{"unexpected tensor", "model.layers.1.mlp.dummy.weight"}},
		{"bad dtype", func(t *testing.T, path string) {
			rewriteHeader(t, path, func(h map[string]any) { h["model.norm.weight"].(map[string]any)["dtype"] = "I32" })
		}, []string{"model.norm.weight", "I32"}},
		{"not json", func(t *testing.T, path string) {
			raw, _ := os.ReadFile(path)
			raw[9] = '!'
			os.WriteFile(path, raw, 0o644)
		}, []string{"header"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := writeModel(t, smallConfig(), F32)
			path := filepath.Join(dir, WeightsFile)
			c.edit(t, path)
			_, err := Load(dir, nil)
			wantErr(t, err, append([]string{path}, c.parts...)...)
		})
	}
	// A tensor the config needs but the file lacks.
	const kb = "model.layers.1.self_attn.k_proj.bias"
	dir, _ := writeModel(t, smallConfig(), F32)
	path := filepath.Join(dir, WeightsFile)
	all, err := ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range all {
		if n != kb {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	writeTensors(t, path, names, all)
	_, err = Load(dir, nil)
	wantErr(t, err, path, kb, "missing")
	// Only deleting its header entry leaves its bytes to no tensor, which the format forbids.
	dir, _ = writeModel(t, smallConfig(), F32)
	path = filepath.Join(dir, WeightsFile)
	rewriteHeader(t, path, func(h map[string]any) { delete(h, kb) })
	_, err = Load(dir, nil)
	wantErr(t, err, path, "belong to no tensor")
}

// A tied model whose file stores lm_head.weight anyway loads when it equals the embedding (it
// sorts before model.embed_tokens.weight, so the check waits for the whole file) and is refused
// when it differs.
func TestTiedHeadStored(t *testing.T) {
	cfg := smallConfig()
	cfg["tie_word_embeddings"] = true
	dir, m := writeModel(t, cfg, F32)
	path := filepath.Join(dir, WeightsFile)
	all, err := ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	all["lm_head.weight"] = all["model.embed_tokens.weight"]
	names := slices.Sorted(mapsKeys(all))
	writeTensors(t, path, names, all)
	got, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(read(t, got, llama.Embedding, -1), read(t, m, llama.Embedding, -1)) {
		t.Fatal("embedding differs")
	}
	head := slices.Clone(all["lm_head.weight"].Data)
	head[len(head)-1]++
	all["lm_head.weight"] = Tensor{Shape: all["lm_head.weight"].Shape, Data: head}
	writeTensors(t, path, names, all)
	_, err = Load(dir, nil)
	wantErr(t, err, path, "lm_head.weight", "differs from model.embed_tokens.weight at row 49")
}

// Hostile or unsupported configs are refused naming config.json and the key.
func TestHostileConfigs(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(c map[string]any)
		parts []string
	}{
		{"heads do not divide width", func(c map[string]any) { c["num_attention_heads"] = 3; c["num_key_value_heads"] = 3 }, []string{"hidden_size 32", "num_attention_heads 3"}},
		{"kv heads", func(c map[string]any) { c["num_key_value_heads"] = 3 }, []string{"num_key_value_heads 3"}},
		{"unknown architecture", func(c map[string]any) { c["architectures"] = []any{"GPT2LMHeadModel"} }, []string{"architectures", "GPT2LMHeadModel"}},
		{"no architecture", func(c map[string]any) { delete(c, "architectures") }, []string{"architectures"}},
		{"rope kind", func(c map[string]any) { c["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0} }, []string{"rope_scaling.rope_type", "yarn"}},
		{"rope old key", func(c map[string]any) { c["rope_scaling"] = map[string]any{"type": "dynamic", "factor": 2.0} }, []string{"rope_scaling.rope_type", "dynamic"}},
		{"sliding window", func(c map[string]any) { c["use_sliding_window"] = true; c["sliding_window"] = 16 }, []string{"use_sliding_window"}},
		{"moe", func(c map[string]any) { c["num_experts"] = 8 }, []string{"num_experts"}},
		{"act", func(c map[string]any) { c["hidden_act"] = "gelu" }, []string{"hidden_act"}},
		{"missing width", func(c map[string]any) { delete(c, "hidden_size") }, []string{"hidden_size missing"}},
		{"negative", func(c map[string]any) { c["num_hidden_layers"] = -1 }, []string{"num_hidden_layers"}},
		{"eps", func(c map[string]any) { c["rms_norm_eps"] = 0 }, []string{"rms_norm_eps"}},
		{"wrong type", func(c map[string]any) { c["vocab_size"] = "many" }, []string{"vocab_size"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := writeModel(t, smallConfig(), F32)
			cfg := smallConfig()
			c.edit(cfg)
			js, _ := json.Marshal(cfg)
			path := filepath.Join(dir, ConfigFile)
			os.WriteFile(path, js, 0o644)
			_, err := Load(dir, nil)
			wantErr(t, err, append([]string{path}, c.parts...)...)
		})
	}
}

// Mistral v0.1's sliding window is accepted and bounds the sequence length instead.
func TestSlidingWindowBoundsLength(t *testing.T) {
	cfg := smallConfig()
	cfg["architectures"] = []any{"MistralForCausalLM"}
	cfg["sliding_window"] = 16
	raw, _ := json.Marshal(cfg)
	c, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxLen() != 16 || c.QKVBias {
		t.Fatalf("MaxLen %d, bias %v: want 16, false", c.MaxLen(), c.QKVBias)
	}
}

// Every preset parses, and cutting keeps the head counts consistent.
func TestPresetsAndCut(t *testing.T) {
	for _, name := range Presets() {
		base, err := LikeConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		cut, err := Cut(base, 2, 256, 1000)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := json.Marshal(cut)
		c, err := ParseConfig(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Layers != 2 || c.Hidden != 256 || c.VocabSize != 1000 || c.QDim() != 256 || c.Heads%c.KVHeads != 0 {
			t.Fatalf("%s cut: %+v", name, c)
		}
	}
	base, _ := LikeConfig("llama3-8b")
	raw, _ := json.Marshal(base)
	c, _ := ParseConfig(raw)
	if c.Rope.Kind != llama.RopeLlama3 || c.KVHeads != 8 || c.Params() < 8e9 || c.Params() > 8.1e9 {
		t.Fatalf("llama3-8b: %+v, %d params", c, c.Params())
	}
}

// Init is a function of its options: the same seed writes the same bytes.
func TestInitDeterministic(t *testing.T) {
	var files [3][]byte
	for i, seed := range []uint64{1, 1, 2} {
		dir := t.TempDir()
		if _, err := Init(InitOptions{Like: "qwen3-8b", Layers: 1, Hidden: 64, Vocab: 100, Seed: seed, Out: dir}); err != nil {
			t.Fatal(err)
		}
		files[i], _ = os.ReadFile(filepath.Join(dir, WeightsFile))
		if _, err := Load(dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(files[0], files[1]) || slices.Equal(files[0], files[2]) {
		t.Fatal("init is not a function of the seed")
	}
	dir := t.TempDir()
	if _, err := Init(InitOptions{Like: "qwen3-8b", Layers: 1, Hidden: 64, Vocab: 100, Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	_, err := Init(InitOptions{Like: "qwen3-8b", Layers: 1, Hidden: 64, Vocab: 100, Seed: 2, Out: dir})
	wantErr(t, err, dir, ConfigFile, "not overwriting")
}

// Init streams the weights of llama.Random with the same seed: its file is byte for byte the one
// Save writes for that model.
func TestInitStreamsRandom(t *testing.T) {
	for _, like := range []string{"qwen2-7b", "qwen3-8b", "llama3-8b"} {
		dir := t.TempDir()
		cfg, err := Init(InitOptions{Like: like, Layers: 2, Hidden: 64, Vocab: 90, Seed: 9, DType: F32, Out: dir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := llama.Random(cfg, 9, 0.02, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
		c, err := unmarshalConfig(raw) // numbers as written: ints stay ints
		if err != nil {
			t.Fatal(err)
		}
		dir2 := t.TempDir()
		if err := Save(dir2, c, m, F32); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(filepath.Join(dir, WeightsFile))
		b, _ := os.ReadFile(filepath.Join(dir2, WeightsFile))
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Fatalf("%s: streamed init differs from Save(Random)", like)
		}
	}
}

// Init copies the tokenizer and its config in, and -like accepts a config file.
func TestInitTokenizerAndFile(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "tokenizer.json"), tinyTokenizer(40), 0o644)
	os.WriteFile(filepath.Join(src, "tokenizer_config.json"), []byte(`{"add_bos_token":true}`), 0o644)
	cfgPath := filepath.Join(src, "my-config.json")
	js, _ := json.Marshal(smallConfig())
	os.WriteFile(cfgPath, js, 0o644)
	dir := t.TempDir()
	cfg, err := Init(InitOptions{Like: cfgPath, Seed: 1, Out: dir, Tokenizer: filepath.Join(src, "tokenizer.json")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "Qwen2ForCausalLM" || cfg.Hidden != 32 {
		t.Fatalf("config %+v", cfg)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !slices.Equal(a, b) {
			t.Fatalf("%s not copied: %v", f, err)
		}
	}
}

// tinyTokenizer is a BPE tokenizer.json of ids 0..maxID: single letters, the last id an added
// special token.
func tinyTokenizer(maxID int) []byte {
	vocab := map[string]int{}
	for i := 0; i < maxID; i++ {
		vocab[fmt.Sprintf("t%d", i)] = i
	}
	js, _ := json.Marshal(map[string]any{
		"added_tokens": []any{map[string]any{"id": maxID, "content": "<s>", "special": true}},
		"model":        map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	})
	return js
}

// model init refuses a tokenizer whose ids pass the vocabulary (-vocab cut below them, or
// another model's tokenizer) before writing anything; at the boundary it is accepted.
func TestInitRefusesTokenizerPastVocab(t *testing.T) {
	src := t.TempDir()
	tok := filepath.Join(src, "tokenizer.json")
	cfgPath := filepath.Join(src, "my-config.json")
	js, _ := json.Marshal(smallConfig()) // vocab_size 50
	os.WriteFile(cfgPath, js, 0o644)
	os.WriteFile(tok, tinyTokenizer(50), 0o644) // ids 0..50
	out := filepath.Join(t.TempDir(), "m")
	_, err := Init(InitOptions{Like: cfgPath, Seed: 1, Out: out, Tokenizer: tok})
	if err == nil || !strings.Contains(err.Error(), "ids 0..50 but vocab_size is 50") || !strings.Contains(err.Error(), "-vocab 51") {
		t.Fatalf("tokenizer past the vocabulary: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the refused init left %s: %v", out, err)
	}
	if _, err := Init(InitOptions{Like: cfgPath, Seed: 1, Out: out, Tokenizer: tok, Vocab: 51}); err != nil {
		t.Fatalf("-vocab 51 covers ids 0..50: %v", err)
	}
}

// Init calls Check with the plan before drawing or writing anything; its refusal leaves nothing.
func TestInitCheckBeforeWork(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m")
	var got InitPlan
	_, err := Init(InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 300, Seed: 1, DType: BF16, Out: out,
		Check: func(p InitPlan) error { got = p; return errors.New("no room") }})
	if err == nil || err.Error() != "no room" {
		t.Fatalf("Check's refusal: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the refused init left %s: %v", out, err)
	}
	c := got.Config
	if c.Layers != 2 || got.Buffer != 4*int64(max(300*64, c.Intermediate*64)) || got.File != 2*c.Params() {
		t.Fatalf("plan %+v", got)
	}
}

// ParseConfig bounds the sizes as products, naming the keys and the product: each of these
// sizes is within its own range, and the model they make would not fit any machine.
func TestParseConfigProducts(t *testing.T) {
	for name, tc := range map[string]struct {
		edit map[string]any
		want string
	}{
		"embedding": {map[string]any{"vocab_size": 1 << 20, "hidden_size": 1 << 13, "num_attention_heads": 64, "num_key_value_heads": 64}, "vocab_size x hidden_size = 1048576 x 8192 = 8589934592 elements"},
		"mlp":       {map[string]any{"intermediate_size": 1 << 20, "hidden_size": 1 << 13, "num_attention_heads": 64, "num_key_value_heads": 64}, "intermediate_size x hidden_size = 1048576 x 8192"},
		"q heads":   {map[string]any{"num_attention_heads": 1 << 20, "num_key_value_heads": 1, "head_dim": 1 << 10, "hidden_size": 1 << 10}, "num_attention_heads x head_dim x hidden_size"},
		"layers":    {map[string]any{"num_hidden_layers": 1 << 20, "hidden_size": 1 << 12, "intermediate_size": 1 << 14, "num_attention_heads": 32, "num_key_value_heads": 32}, "num_hidden_layers x parameters per block = 1048576 x"},
	} {
		c := smallConfig()
		for k, v := range tc.edit {
			c[k] = v
		}
		js, _ := json.Marshal(c)
		_, err := ParseConfig(js)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// Llama-3.1-405B's shape is within the bounds.
	big := smallConfig()
	for k, v := range map[string]any{"vocab_size": 128256, "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
		"num_attention_heads": 128, "num_key_value_heads": 8, "architectures": []any{"LlamaForCausalLM"}} {
		big[k] = v
	}
	js, _ := json.Marshal(big)
	if _, err := ParseConfig(js); err != nil {
		t.Fatalf("Llama-3.1-405B's shape: %v", err)
	}
}

// Check refuses what Load refuses in the files' structure, without allocating the model: a
// missing tensor, a wrong shape, an unexpected tensor, a missing weights file.
func TestCheckWithoutLoading(t *testing.T) {
	c := smallConfig()
	dir, _ := writeModel(t, c, F32)
	got, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hidden != 32 || got.Layers != 2 {
		t.Fatalf("config %+v", got)
	}
	// A config.json that no longer matches the file: Check names the tensor, as Load does.
	c["vocab_size"] = 60
	js, _ := json.Marshal(c)
	os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644)
	_, cerr := Check(dir)
	_, lerr := Load(dir, nil)
	if cerr == nil || lerr == nil || cerr.Error() != lerr.Error() || !strings.Contains(cerr.Error(), "model.embed_tokens.weight") {
		t.Fatalf("Check %v, Load %v", cerr, lerr)
	}
	os.Remove(filepath.Join(dir, WeightsFile))
	if _, err := Check(dir); err == nil || !strings.Contains(err.Error(), WeightsFile) {
		t.Fatalf("no weights: %v", err)
	}
}
