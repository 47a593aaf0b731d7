// The hostile-budget suite (issue 37, items 3 and 6) runs through the hostile-input harness of
// hostile_test.go the cases of one budget for every allocation and of the wrong-but-accepted
// inputs on the decoder side: config.json sizes whose products no machine holds, models within
// those bounds but beyond this machine (the resource pre-flight of store extract -model, decode,
// model init and task lm), a decode set whose mixing matrix or shields no machine holds, a
// tokenizer id that sized a 16 GiB table, a tokenizer past the model's vocab_size or model init
// -vocab, texts that are not valid UTF-8, and a store of no texts.
//
//	go test ./cmd/geloattack -run TestHostileBudget -v
//
// GELOATTACK_HOSTILE_BIN=path runs the cases against another binary (an older build).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/runner"
)

func TestHostileBudget(t *testing.T) {
	start := time.Now()
	fx := &hostileFixture{bin: filepath.Join(t.TempDir(), "geloattack")}
	if bin := os.Getenv("GELOATTACK_HOSTILE_BIN"); bin != "" {
		fx.bin = bin
	} else if goTool, err := exec.LookPath("go"); err == nil {
		if out, err := exec.Command(goTool, "build", "-o", fx.bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	} else {
		fx.bin, fx.env = os.Args[0], []string{"GELOATTACK_TEST_MAIN=1"}
	}
	// The refusals are the point: a skip set in the caller's environment would turn them into warnings.
	fx.env = append(fx.env, runner.SkipPreflightEnv+"=")
	tokDir := t.TempDir()
	writeTinyLM(t, tokDir, "5")
	cases := budgetCases(filepath.Join(tokDir, "tokenizer.json"))
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
	}
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runHostileCase(t, fx, c)
			})
		}
	})
	t.Logf("%d cases in %s", len(cases), time.Since(start).Round(100*time.Millisecond))
}

// hugeModel is a config.json within the size products (5.5e11 parameters, each matrix under 2^32
// elements) that no machine holds in float32 (2.2 TB).
var hugeModel = map[string]any{"hidden_size": 16384, "intermediate_size": 65536, "num_hidden_layers": 128,
	"num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 32000}

func budgetCases(tokenizer string) []hostileCase {
	extract := []string{"store", "extract", "-model", victimModel, "-texts", "texts.txt", "-out", victimStore, "-layer", "1", "-quiet"}
	decodeArgs := func(extra ...string) []string {
		return append([]string{"decode", "-model", victimModel, "-texts", "texts.txt", "-batches", "1", "-bag-only"}, extra...)
	}
	config := victimModel + "/" + "config.json"
	// withTok is a decoder directory with a real tokenizer (ids 0..285) and 400 texts.
	withTok := func(edit func(t *testing.T, dir string)) func(t *testing.T, fx *hostileFixture, dir string) {
		return setups(withDecoder(nil), func(t *testing.T, _ *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, victimModel, "tokenizer.json"), hReadFile(t, tokenizer))
			hWriteFile(t, filepath.Join(dir, "texts.txt"), hReadFile(t, filepath.Join(filepath.Dir(tokenizer), "texts.txt")))
			if edit != nil {
				edit(t, filepath.Join(dir, victimModel))
			}
		})
	}
	writeIn := func(rel string, b []byte) func(t *testing.T, fx *hostileFixture, dir string) {
		return func(t *testing.T, _ *hostileFixture, dir string) { hWriteFile(t, filepath.Join(dir, rel), b) }
	}
	// The tokenizer with one more added token at id.
	tokWithID := func(id int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			var tj map[string]any
			if err := json.Unmarshal(hReadFile(t, tokenizer), &tj); err != nil {
				t.Fatal(err)
			}
			tj["added_tokens"] = append(tj["added_tokens"].([]any), map[string]any{"id": id, "content": "<far>", "special": true})
			b, _ := json.Marshal(tj)
			hWriteFile(t, filepath.Join(dir, "tokenizer.json"), b)
		}
	}
	lmYAML := func(model string) string {
		return fmt.Sprintf("name: huge-lm\nmodel: {task: lm}\nlm:\n  texts: texts.txt\n  tokenizer: %s\n  model: %s\ntrain: {steps: 5, batch_size: 4, warmup_steps: 1}\n",
			victimModel+"/tokenizer.json", model)
	}
	// An empty store as another tool (or a writer before store.Writer refused one) leaves it:
	// meta.json with num_texts 0, read and refused before the Arrow files.
	emptyStore := func(t *testing.T, _ *hostileFixture, dir string) {
		hWriteFile(t, filepath.Join(dir, victimStore, store.MetaFile), mustJSON(store.Meta{FormatVersion: store.FormatVersion,
			D: 4, E: 2, DType: store.Float32, Norm: store.NormRaw}))
	}
	preflight := []string{"resource pre-flight", "weights (float32, 128 blocks", runner.SkipPreflightEnv + "=1"}
	return []hostileCase{
		// Products of config.json sizes, each within its own range.
		{name: "config.json vocab_size x hidden_size", setup: withTok(editDecoderConfig(map[string]any{"vocab_size": 1 << 20, "hidden_size": 8192,
			"num_attention_heads": 64, "num_key_value_heads": 64, "intermediate_size": 16384})),
			args: extract, want: []string{config, "vocab_size x hidden_size = 1048576 x 8192"}},
		{name: "config.json num_hidden_layers x block", setup: withTok(editDecoderConfig(map[string]any{"num_hidden_layers": 1 << 20,
			"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32})),
			args: decodeArgs(), want: []string{config, "num_hidden_layers x parameters per block = 1048576 x"}},
		// The pre-flight: within the products, beyond the machine.
		{name: "store extract of a 2 TB model", setup: withTok(editDecoderConfig(hugeModel)), args: extract, want: preflight,
			check: nothingLeft(victimStore)},
		// decode loads only the blocks it attacks (0 and 1 here): refused on those alone.
		{name: "decode of a 2 TB model", setup: withTok(editDecoderConfig(hugeModel)), args: decodeArgs(),
			want: []string{"resource pre-flight", "weights (float32, blocks 0..1 of 128", runner.SkipPreflightEnv + "=1"}},
		{name: "decode -shield-rows 1048576", setup: withTok(nil), args: decodeArgs("-shield-rows", "1048576"),
			want: []string{"set size n", "1048576 shields", "mixing matrix", "2^32"}},
		{name: "decode -blocks past the model", setup: withTok(nil), args: decodeArgs("-blocks", "0,7"), want: []string{"-blocks", "block 7", "0..1"}},
		{name: "model init of a 16 GiB tensor", setup: writeIn("big.json", mustJSON(map[string]any{"architectures": []any{"LlamaForCausalLM"},
			"vocab_size": 1 << 19, "hidden_size": 8192, "intermediate_size": 8192, "num_hidden_layers": 1, "num_attention_heads": 64,
			"num_key_value_heads": 64, "rms_norm_eps": 1e-5, "max_position_embeddings": 64})),
			args: []string{"model", "init", "-like", "big.json", "-out", newModelDir}, want: []string{"resource pre-flight", "drawing buffer", "16 GiB"},
			check: nothingLeft(newModelDir)},
		{name: "task lm of 5e11 parameters", setup: setups(withTok(nil), writeIn("lm.yaml", []byte(lmYAML("{hidden: 8192, layers: 512, heads: 64, mlp: 32768, seq: 16}")))),
			args: []string{"train", "-config", "lm.yaml", "-out", victimRun, "-device", "cpu"}, want: []string{"resource pre-flight", "task lm", "weights+grads+AdamW"}},
		{name: "task lm tokenizer id 2^20-1", setup: setups(withTok(tokWithID(1<<20-1)), writeIn("lm.yaml", []byte(lmYAML("{hidden: 8192, layers: 1, heads: 64, mlp: 64, seq: 16}")))),
			args: []string{"train", "-config", "lm.yaml", "-out", victimRun, "-device", "cpu"}, want: []string{"id 1048575"}},
		// Tokenizer ids: no table sized by an id, and none past vocab_size.
		{name: "tokenizer id 2^30-1", setup: withTok(tokWithID(1<<30 - 1)), args: extract, want: []string{"tokenizer.json", "id 1073741823"}},
		{name: "decode tokenizer id 2^30-1", setup: withTok(tokWithID(1<<30 - 1)), args: decodeArgs(), want: []string{"tokenizer.json", "id 1073741823"}},
		{name: "tokenizer past vocab_size", setup: setups(func(t *testing.T, _ *hostileFixture, dir string) {
			// A model of 200 token rows, and the 286-id tokenizer beside it.
			if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 64, Vocab: 200, Seed: 1, DType: hf.F32, Out: filepath.Join(dir, victimModel)}); err != nil {
				t.Fatal(err)
			}
		}, writeIn(victimModel+"/tokenizer.json", hReadFileNoT(tokenizer)), writeIn("texts.txt", manyTexts("the cat sat %d", "on the mat"))), args: decodeArgs(),
			want: []string{"tokenizer.json", "outside the model's vocabulary", "vocab_size = 200"}},
		{name: "model init -vocab below the tokenizer", setup: func(t *testing.T, _ *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, "tok", "tokenizer.json"), hReadFile(t, tokenizer))
		}, args: []string{"model", "init", "-like", "llama2-7b", "-layers", "1", "-hidden", "32", "-vocab", "100", "-tokenizer", "tok/tokenizer.json", "-out", newModelDir},
			want: []string{"tok/tokenizer.json", "ids 0..285 but vocab_size is 100", "-vocab 286"}, check: nothingLeft(newModelDir)},
		// Texts that are not valid UTF-8: refused naming file, line and byte offset.
		{name: "store extract texts with invalid UTF-8", setup: setups(withTok(nil), writeIn("texts.txt", []byte("one\ntwo \xff three\n"))),
			args: extract, want: []string{"texts.txt:2: byte offset 4 of the line (offset 8 of the file)", "invalid UTF-8", "-invalid-utf8 replace"}},
		{name: "decode texts with invalid UTF-8", setup: setups(withTok(nil), writeIn("texts.jsonl", manyTexts(`{"text": "text %d of the cat"}`, `{"text": "bad `+"\xc3\x28"+`"}`))),
			args: []string{"decode", "-model", victimModel, "-texts", "texts.jsonl", "-batches", "1", "-bag-only"}, want: []string{"texts.jsonl:3: byte offset 14 of the line", "invalid UTF-8"}},
		{name: "lm.texts with invalid UTF-8", setup: setups(withTok(nil), writeIn("texts.txt", manyTexts("the cat sat %d", "\xfe sat")),
			writeIn("lm.yaml", []byte(lmYAML("{hidden: 16, layers: 1, heads: 2, mlp: 32, seq: 8}")))),
			args: []string{"train", "-config", "lm.yaml", "-out", victimRun, "-device", "cpu"}, want: []string{"texts.txt:3: byte offset 0 of the line", "invalid UTF-8"}},
		// An empty store.
		{name: "store validate of an empty store", setup: emptyStore, args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "num_texts = 0", "no texts"}},
		{name: "store info of an empty store", setup: emptyStore, args: []string{"store", "info", "-store", victimStore}, want: []string{victimStore, "no texts"}},
	}
}

// manyTexts is 200 lines of format (given the line number) with bad as the third line.
func manyTexts(format, bad string) []byte {
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		if i == 3 {
			b.WriteString(bad + "\n")
			continue
		}
		fmt.Fprintf(&b, format+"\n", i)
	}
	return []byte(b.String())
}

// hReadFileNoT reads a fixture file written before the cases are listed.
func hReadFileNoT(p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return b
}

// mustJSON is v as JSON.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The flag that reads invalid UTF-8 anyway replaces and counts, and the store records it.
func TestExtractReplacesInvalidUTF8WhenAsked(t *testing.T) {
	dir := t.TempDir()
	writeTinyLM(t, dir, "5")
	md := filepath.Join(dir, "m")
	if err := cmdModelInit.run(t.Context(), "geloattack model init", []string{"-like", "llama2-7b", "-layers", "1", "-hidden", "32", "-vocab", "300", "-tokenizer", filepath.Join(dir, "tokenizer.json"), "-out", md}, io.Discard); err != nil {
		t.Fatal(err)
	}
	texts := filepath.Join(dir, "bad.txt")
	hWriteFile(t, texts, []byte("the cat\nthe \xff\xfe mat\nsat \xc3\n"))
	out := filepath.Join(dir, "s")
	args := []string{"-model", md, "-texts", texts, "-out", out, "-layer", "1", "-quiet"}
	if err := cmdStoreExtract.run(t.Context(), "geloattack store extract", args, io.Discard); err == nil || !strings.Contains(err.Error(), "bad.txt:2: byte offset 4") {
		t.Fatalf("refusal: %v", err)
	}
	if err := cmdStoreExtract.run(t.Context(), "geloattack store extract", append(args, "-invalid-utf8", "replace"), io.Discard); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.NumTexts() != 3 || !strings.Contains(s.Meta().Source, "2 invalid UTF-8 sequences replaced with U+FFFD") {
		t.Fatalf("%d texts, source %q", s.NumTexts(), s.Meta().Source)
	}
}
