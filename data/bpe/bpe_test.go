package bpe

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/data/bpe/bpetest"
	"golang.org/x/text/unicode/norm"
)

// Tiny hand-made tokenizers whose ids can be worked out by hand.

// spJSON is a SentencePiece-style tokenizer (bpetest.SentencePiece): <unk> <s> </s>, the 256
// byte tokens (ids 3..258), then ▁ a b c ab ▁a ▁ab bc (259..266) with merges a+b, ▁+a, ▁a+b, b+c
// in that rank order.
func spJSON() map[string]any {
	return bpetest.SentencePiece([]string{"▁", "a", "b", "c", "ab", "▁a", "▁ab", "bc"}, []string{"a b", "▁ a", "▁a b", "b c"})
}

// blJSON is a byte-level tokenizer: the 256 byte characters with id = byte value, then
// he the Ġt Ġthe (256..259) with merges h+e, t+he, Ġ+t, Ġt+he, and the special <|end|> (260).
func blJSON() map[string]any {
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	for i, tok := range []string{"he", "the", "Ġt", "Ġthe"} {
		vocab[tok] = 256 + i
	}
	return map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"added_tokens": []any{map[string]any{"id": 260, "content": "<|end|>", "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": true}},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patLlama3}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false,
			"ignore_merges": false, "vocab": vocab,
			"merges": []any{[]any{"h", "e"}, []any{"t", "he"}, []any{"Ġ", "t"}, []any{"Ġt", "he"}},
		},
	}
}

// write puts tokenizer.json (and tokenizer_config.json when cfg is not nil) in a new directory and
// returns the tokenizer.json path.
func write(t *testing.T, tj map[string]any, cfg map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	put := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("tokenizer.json", tj)
	if cfg != nil {
		put("tokenizer_config.json", cfg)
	}
	return filepath.Join(dir, "tokenizer.json")
}

func load(t *testing.T, tj map[string]any, cfg map[string]any) *Tokenizer {
	t.Helper()
	tok, err := Load(write(t, tj, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func encode(t *testing.T, tok *Tokenizer, text string, special bool) []int {
	t.Helper()
	ids, err := tok.Encode(text, special)
	if err != nil {
		t.Fatalf("Encode(%q): %v", text, err)
	}
	return ids
}

func TestSentencePieceKnownAnswers(t *testing.T) {
	tok := load(t, spJSON(), nil)
	if tok.Kind() != KindSentencePiece || tok.VocabSize() != 267 {
		t.Fatalf("kind %s vocab %d", tok.Kind(), tok.VocabSize())
	}
	b := func(x byte) int { return 3 + int(x) }
	for _, c := range []struct {
		text    string
		special bool
		want    []int
	}{
		// "▁ab▁c": a+b (rank 0) first, so ▁+a and then ▁a+b can never apply.
		{"ab c", true, []int{1, 259, 263, 259, 262}},
		{"abc", false, []int{259, 263, 262}},                 // b+c loses to a+b: "▁", "ab", "c"
		{"ca", false, []int{259, 262, 260}},                  // no rule for ▁+c or c+a
		{"a", false, []int{264}},                             // ▁+a
		{"", true, []int{1}},                                 // BOS alone
		{"", false, nil},                                     //
		{"a€", false, []int{264, b(0xE2), b(0x82), b(0xAC)}}, // byte fallback
		{"b<s>a", false, []int{259, 261, 1, 264}},            // each section gets its ▁
		{"<s></s>", true, []int{1, 1, 2}},
		{"aa", false, []int{264, 260}}, // the leftmost of equal pairs merges first
	} {
		if got := encode(t, tok, c.text, c.special); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", c.text, c.special, got, c.want)
		}
	}
	if id, ok := tok.BOS(); !ok || id != 1 || !tok.AddsBOS() {
		t.Errorf("BOS = %d %v, adds %v", id, ok, tok.AddsBOS())
	}
	if got := tok.Decode([]int{264, b(0xE2), b(0x82), b(0xAC)}); got != "a€" {
		t.Errorf("Decode = %q, want a€", got)
	}
	// A truncated sequence decodes to one U+FFFD per byte, as Hugging Face's tokenizers does
	// (TextDecoder, and so transformers.js, gives one for both).
	if got := tok.Decode([]int{264, b(0xE2), b(0x82), 260}); got != "a\uFFFD\uFFFDa" {
		t.Errorf("Decode of a truncated sequence = %q", got)
	}
}

func TestSentencePieceUnk(t *testing.T) {
	tj := spJSON()
	m := tj["model"].(map[string]any)
	m["byte_fallback"] = false
	tok := load(t, tj, nil)
	if got := encode(t, tok, "a€€b", false); !slices.Equal(got, []int{264, 0, 261}) {
		t.Errorf("fused unk: %v", got)
	}
	m["fuse_unk"] = false
	tok = load(t, tj, nil)
	if got := encode(t, tok, "a€€b", false); !slices.Equal(got, []int{264, 0, 0, 261}) {
		t.Errorf("unfused unk: %v", got)
	}
}

func TestByteLevelKnownAnswers(t *testing.T) {
	tok := load(t, blJSON(), nil)
	if tok.Kind() != KindByteLevel || tok.VocabSize() != 261 {
		t.Fatalf("kind %s vocab %d", tok.Kind(), tok.VocabSize())
	}
	for _, c := range []struct {
		text string
		want []int
	}{
		// "the": h+e, then t+he. " the": h+e (rank 0) before Ġ+t, then t+he, so Ġt+he never applies.
		{"the the", []int{257, ' ', 257}},
		{"é", []int{0xC3, 0xA9}},
		{"a<|end|>", []int{'a', 260}},
		{"x  y", []int{'x', ' ', ' ', 'y'}}, // "x", " ", " y"
		{"\n\n", []int{'\n', '\n'}},
	} {
		if got := encode(t, tok, c.text, true); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if _, ok := tok.BOS(); ok {
		t.Error("a tokenizer without bos_token reports a BOS")
	}
	// ignore_merges: a pre-token that is itself a token is taken whole.
	tj := blJSON()
	tj["model"].(map[string]any)["ignore_merges"] = true
	tok = load(t, tj, nil)
	if got := encode(t, tok, "the the", false); !slices.Equal(got, []int{257, 259}) {
		t.Errorf("ignore_merges: %v, want [257 259]", got)
	}
}

func TestConfigAddsBOSAndEOS(t *testing.T) {
	cfg := map[string]any{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "add_eos_token": true,
		"bos_token": "<s>", "eos_token": map[string]any{"__type": "AddedToken", "content": "</s>"}}
	tok := load(t, spJSON(), cfg)
	if got := encode(t, tok, "a", true); !slices.Equal(got, []int{1, 264, 2}) {
		t.Errorf("add_bos+add_eos: %v", got)
	}
	cfg["add_bos_token"] = false
	cfg["add_eos_token"] = false
	tok = load(t, spJSON(), cfg)
	if got := encode(t, tok, "a", true); !slices.Equal(got, []int{264}) || tok.AddsBOS() {
		t.Errorf("no specials: %v", got)
	}
	if id, ok := tok.BOS(); !ok || id != 1 {
		t.Errorf("BOS %d %v", id, ok)
	}
}

func TestAddedTokenFlags(t *testing.T) {
	tj := blJSON()
	tj["added_tokens"] = append(tj["added_tokens"].([]any),
		map[string]any{"id": 261, "content": "<L>", "lstrip": true, "rstrip": false, "special": false},
		map[string]any{"id": 262, "content": "<R>", "lstrip": false, "rstrip": true, "special": false},
		map[string]any{"id": 263, "content": "<|end|>x", "special": true}, // longest match wins
		map[string]any{"id": 264, "content": "he", "single_word": true, "special": false},
	)
	tok := load(t, tj, nil)
	for _, c := range []struct {
		text string
		want []int
	}{
		{"a  <L>b", []int{'a', 261, 'b'}},
		{"a<R>  b", []int{'a', 262, 'b'}},
		{"<|end|>x<|end|>y", []int{263, 260, 'y'}},
		{"he the", []int{264, ' ', 257}}, // "he" alone is the added token; inside "the" it is not
	} {
		if got := encode(t, tok, c.text, false); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if !tok.IsSpecial(260) || tok.IsSpecial(261) {
		t.Error("special flags")
	}
}

func TestPreTokenizerSplits(t *testing.T) {
	for _, c := range []struct {
		m    matcher
		text string
		want []string
	}{
		{knownPatterns[patLlama3], "Hello world", []string{"Hello", " world"}},
		{knownPatterns[patLlama3], "  hi", []string{" ", " hi"}},
		{knownPatterns[patLlama3], "a  \n\n b", []string{"a", "  \n\n", " b"}},
		{knownPatterns[patLlama3], "x   ", []string{"x", "   "}},
		{knownPatterns[patLlama3], "x   y", []string{"x", "  ", " y"}},
		{knownPatterns[patLlama3], "\tx", []string{"\tx"}},
		{knownPatterns[patLlama3], "12345", []string{"123", "45"}},
		{knownPatterns[patLlama3], "I'M we'Re", []string{"I", "'M", " we", "'Re"}},
		{knownPatterns[patLlama3], " ??\n\nx", []string{" ??\n\n", "x"}},
		{knownPatterns[patLlama3], "!abc", []string{"!abc"}},
		{knownPatterns[patLlama3], " !abc", []string{" !", "abc"}},
		{knownPatterns[patLlama3], "a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
		{knownPatterns[patLlama3], "a\u0085b", []string{"a", "\u0085b"}},
		// \s is White_Space, as in the Rust library: U+0085 is whitespace, U+FEFF is not.
		{knownPatterns[patLlama3], "a\u0085!", []string{"a", "\u0085", "!"}},
		{knownPatterns[patLlama3], "a\ufeff!", []string{"a", "\ufeff!"}},
		{knownPatterns[patLlama3], "a \u0085", []string{"a", " \u0085"}},
		// Unicode case folding in the contractions: "'ſ" is "'s" (and "'ſ" is no letter run then).
		{knownPatterns[patLlama3], "I'ſa", []string{"I", "'ſ", "a"}},
		{knownPatterns[patQwen], "IT'ſ", []string{"IT", "'ſ"}},
		{knownPatterns[patGPT2], "it'ſa", []string{"it", "'", "ſa"}},
		// Unicode 16.0 letters and digits (Garay, Ol Onal), which Go's own tables lack.
		{knownPatterns[patLlama3], "a\U00010D4Ab", []string{"a\U00010D4Ab"}},
		{knownPatterns[patLlama3], "x\U0001E5F1\U0001E5F2\U0001E5F3\U0001E5F4", []string{"x", "\U0001E5F1\U0001E5F2\U0001E5F3", "\U0001E5F4"}},
		{knownPatterns[patQwen], "12345", []string{"1", "2", "3", "4", "5"}},
		{knownPatterns[patGPT2], "Hello  world", []string{"Hello", " ", " world"}},
		{knownPatterns[patGPT2], "it's IT'S", []string{"it", "'s", " IT", "'", "S"}},
		{knownPatterns[patGPT2], "a 123 !!", []string{"a", " 123", " !!"}},
	} {
		if got := splitPieces(c.text, c.m, nil); !slices.Equal(got, c.want) {
			t.Errorf("split(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestRoundTrip: Decode(Encode(s)) == s for texts without special-token strings (and, for the
// SentencePiece tokenizer, without "▁", which decodes to a space).
func TestRoundTrip(t *testing.T) {
	sp, bl := load(t, spJSON(), nil), load(t, blJSON(), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abc the é€日😀 \t\n\r\x00'!1")
	for i := 0; i < 2000; i++ {
		r := make([]rune, rng.IntN(30))
		for j := range r {
			r[j] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(r)
		for _, tok := range []*Tokenizer{sp, bl} {
			if got := tok.Decode(encode(t, tok, s, false)); got != s {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", tok.Kind(), s, got)
			}
		}
	}
}

// TestHostileFiles: every broken or unsupported tokenizer.json is refused with an error naming
// the file and the field.
func TestHostileFiles(t *testing.T) {
	type edit func(tj map[string]any)
	model := func(tj map[string]any) map[string]any { return tj["model"].(map[string]any) }
	for _, c := range []struct {
		name  string
		base  func() map[string]any
		edit  edit
		field string
	}{
		{"unknown model type", spJSON, func(tj map[string]any) { model(tj)["type"] = "Unigram" }, "model.type"},
		{"WordPiece", spJSON, func(tj map[string]any) { model(tj)["type"] = "WordPiece" }, "model.type"},
		{"no model type", spJSON, func(tj map[string]any) { delete(model(tj), "type") }, "model.type"},
		{"no model", spJSON, func(tj map[string]any) { delete(tj, "model") }, "model"},
		{"missing vocab", spJSON, func(tj map[string]any) { delete(model(tj), "vocab") }, "model.vocab"},
		{"negative id", spJSON, func(tj map[string]any) { model(tj)["vocab"].(map[string]any)["zz"] = -3 }, "model.vocab"},
		{"duplicate id", spJSON, func(tj map[string]any) { model(tj)["vocab"].(map[string]any)["zz"] = 260 }, "model.vocab"},
		{"merge of unknown token", spJSON, func(tj map[string]any) { model(tj)["merges"] = []any{"a b", "x y"} }, "model.merges[1]"},
		{"merge result not a token", spJSON, func(tj map[string]any) { model(tj)["merges"] = []any{"c a"} }, "model.merges[0]"},
		{"merge without space", spJSON, func(tj map[string]any) { model(tj)["merges"] = []any{"ab"} }, "model.merges[0]"},
		{"merge pair of three", blJSON, func(tj map[string]any) { model(tj)["merges"] = []any{[]any{"h", "e", "x"}} }, "model.merges[0]"},
		{"merges not a list", spJSON, func(tj map[string]any) { model(tj)["merges"] = 7 }, "model.merges"},
		{"missing merges", spJSON, func(tj map[string]any) { delete(model(tj), "merges") }, "model.merges"},
		{"unk not in vocab", spJSON, func(tj map[string]any) { model(tj)["unk_token"] = "<nope>" }, "model.unk_token"},
		{"dropout", spJSON, func(tj map[string]any) { model(tj)["dropout"] = 0.1 }, "model.dropout"},
		{"subword prefix", spJSON, func(tj map[string]any) { model(tj)["continuing_subword_prefix"] = "##" }, "model.continuing_subword_prefix"},
		{"unknown normalizer", spJSON, func(tj map[string]any) {
			tj["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}}}
		}, "normalizer.normalizers[0].type"},
		{"regex Replace", spJSON, func(tj map[string]any) {
			tj["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": "▁"}
		}, "normalizer.pattern.Regex"},
		{"unknown pre-tokenizer", blJSON, func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Whitespace"}
		}, "pre_tokenizer.type"},
		{"unknown regex", blJSON, func(tj map[string]any) {
			tj["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\w+`}
		}, "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{"split behaviour", blJSON, func(tj map[string]any) {
			tj["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["behavior"] = "MergedWithPrevious"
		}, "pre_tokenizer.pretokenizers[0].behavior"},
		{"unknown decoder", blJSON, func(tj map[string]any) { tj["decoder"] = map[string]any{"type": "CTC"} }, "decoder.type"},
		{"decoder without type", blJSON, func(tj map[string]any) { tj["decoder"] = map[string]any{} }, "decoder.type"},
		{"unknown post-processor", blJSON, func(tj map[string]any) {
			tj["post_processor"] = map[string]any{"type": "BertProcessing"}
		}, "post_processor.type"},
		{"template without A", spJSON, func(tj map[string]any) {
			tj["post_processor"].(map[string]any)["single"] = []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}}
		}, "post_processor.single"},
		{"template with unknown token", spJSON, func(tj map[string]any) {
			tj["post_processor"].(map[string]any)["single"] = []any{map[string]any{"SpecialToken": map[string]any{"id": "<bos>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}}
		}, "post_processor.single[0].SpecialToken.id"},
		{"truncation", spJSON, func(tj map[string]any) { tj["truncation"] = map[string]any{"max_length": 512} }, "truncation"},
		{"added token without id", spJSON, func(tj map[string]any) {
			tj["added_tokens"] = []any{map[string]any{"content": "<x>"}}
		}, "added_tokens[0].id"},
		{"added token clashing", spJSON, func(tj map[string]any) {
			tj["added_tokens"] = []any{map[string]any{"id": 260, "content": "<x>"}}
		}, "added_tokens[0]"},
		{"empty added token", spJSON, func(tj map[string]any) {
			tj["added_tokens"] = []any{map[string]any{"id": 300, "content": ""}}
		}, "added_tokens[0].content"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tj := c.base()
			c.edit(tj)
			path := write(t, tj, nil)
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %s and %s", err, path, c.field)
			}
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(path, []byte(`{"model": [`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("config bos not a token", func(t *testing.T) {
		path := write(t, spJSON(), map[string]any{"bos_token": "<bos>"})
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") || !strings.Contains(err.Error(), "bos_token") {
			t.Errorf("error %v", err)
		}
	})
}

// TestHash is the hex SHA-256 of the file, so equal files give equal hashes and any edit changes it.
func TestHash(t *testing.T) {
	a, b := load(t, spJSON(), nil), load(t, spJSON(), nil)
	tj := spJSON()
	tj["version"] = "1.1"
	c := load(t, tj, nil)
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() || len(a.Hash()) != 64 {
		t.Errorf("hashes %s %s %s", a.Hash(), b.Hash(), c.Hash())
	}
}

// FuzzEncode: no input panics, ids are in range, and valid UTF-8 without special strings or "▁"
// round-trips through Decode.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "the the", "a  b\n\n", "é€😀", "\xff\xfe", "<s>a</s>", "<|end|>", "'S 123"} {
		f.Add(s)
	}
	dir := f.TempDir()
	var toks []*Tokenizer
	for i, tj := range []map[string]any{spJSON(), blJSON()} {
		b, _ := json.Marshal(tj)
		p := filepath.Join(dir, fmt.Sprint(i), "tokenizer.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			f.Fatal(err)
		}
		tok, err := Load(p)
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ids, err := tok.Encode(s, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("id %d out of range", id)
				}
			}
			plain := utf8.ValidString(s) && !strings.ContainsAny(s, "<▁")
			if !plain {
				continue
			}
			ids, _ = tok.Encode(s, false)
			if got := tok.Decode(ids); got != s {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", tok.Kind(), s, got)
			}
		}
	})
}

// TestMetaspace: the newer SentencePiece layout (Mistral v0.3 and later) has no normalizer and a
// Metaspace pre-tokenizer; prepend_scheme "first" puts "▁" only before the text's first section,
// as tokenizers does (transformers.js 3.7 reads only the older add_prefix_space here).
func TestMetaspace(t *testing.T) {
	tj := spJSON()
	tj["normalizer"] = nil
	tj["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	tj["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
		map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
	}}
	tok := load(t, tj, nil)
	for _, c := range []struct {
		text string
		want []int
	}{
		{"ab c", []int{259, 263, 259, 262}},
		{"b<s>a", []int{259, 261, 1, 260}}, // no ▁ after <s>
		{"<s>a", []int{1, 260}},
		{"ab", []int{259, 263}},
	} {
		if got := encode(t, tok, c.text, false); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if got := tok.Decode([]int{259, 263, 259, 262}); got != "ab c" {
		t.Errorf("Decode = %q", got)
	}
	// split: true cuts before every "▁": "▁a" and "▁b" are merged separately.
	tj["pre_tokenizer"].(map[string]any)["split"] = true
	tok = load(t, tj, nil)
	if got := tok.preTok[0]([]string{"a b  c"}, true); !slices.Equal(got, []string{"▁a", "▁b", "▁", "▁c"}) {
		t.Errorf("split pieces %q", got)
	}
	if got := encode(t, tok, "a b", false); !slices.Equal(got, []int{264, 259, 261}) {
		t.Errorf("split Encode(%q) = %v", "a b", got)
	}
}

// TestNormalizedAddedToken: a token with normalized: true is found in the normalized section, so
// the text after it gets no "▁" of its own (the normalizer prepended one to the whole section).
func TestNormalizedAddedToken(t *testing.T) {
	tj := spJSON()
	for _, a := range tj["added_tokens"].([]any) {
		a.(map[string]any)["normalized"] = true
	}
	tok := load(t, tj, nil)
	if got := encode(t, tok, "b<s>a", false); !slices.Equal(got, []int{259, 261, 1, 260}) {
		t.Errorf("normalized <s>: %v, want [259 261 1 260]", got)
	}
	if got := encode(t, tok, "<s>", true); !slices.Equal(got, []int{1, 259, 1}) {
		t.Errorf("normalized <s> alone: %v, want [1 259 1]", got)
	}
	if got := tok.Decode([]int{259, 261, 1, 260}); got != "b<s>a" {
		t.Errorf("Decode = %q", got)
	}
}

// TestWordSplitIsExact: cutting a SentencePiece section into words before BPE (done when no
// merged token has a "▁" after another character) gives the ids of BPE over the whole section.
func TestWordSplitIsExact(t *testing.T) {
	tok := load(t, spJSON(), nil)
	if len(tok.preTok) != 1 {
		t.Fatal("word split not enabled for the tiny SentencePiece tokenizer")
	}
	whole := load(t, spJSON(), nil)
	whole.preTok = nil
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("abc ▁é€")
	for i := 0; i < 3000; i++ {
		r := make([]rune, rng.IntN(40))
		for j := range r {
			r[j] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(r)
		if a, b := encode(t, tok, s, true), encode(t, whole, s, true); !slices.Equal(a, b) {
			t.Fatalf("%q: words %v, whole %v", s, a, b)
		}
	}
	if got := splitWords("▁▁ab▁c▁▁d", nil); !slices.Equal(got, []string{"▁▁ab", "▁c", "▁▁d"}) {
		t.Errorf("splitWords = %q", got)
	}
	// A merged token with an inner "▁" turns the cut off.
	tj := spJSON()
	m := tj["model"].(map[string]any)
	m["vocab"].(map[string]any)["a▁"] = 267
	m["merges"] = append(m["merges"].([]any), "a ▁")
	if tok := load(t, tj, nil); len(tok.preTok) != 0 {
		t.Error("word split enabled although a▁ can be merged")
	}
}

// TestByteFallbackRuns: a run of <0xNN> tokens decodes to its text when it is UTF-8, else to one
// U+FFFD per byte of the run, its valid bytes included (as Hugging Face's tokenizers decodes).
func TestByteFallbackRuns(t *testing.T) {
	tok := load(t, spJSON(), nil)
	bytes := func(bs ...int) []int {
		ids := make([]int, len(bs))
		for i, b := range bs {
			ids[i] = 3 + b
		}
		return ids
	}
	for _, c := range []struct {
		ids  []int
		want string
	}{
		{bytes(0xE2, 0x82, 0xAC), "€"},
		{bytes(0x41), "A"},
		{bytes(0xE2, 0x82), "\uFFFD\uFFFD"},
		{bytes(0xE2, 0x82, 0x41), "\uFFFD\uFFFD\uFFFD"},
		{bytes(0x41, 0x80, 0x42), "\uFFFD\uFFFD\uFFFD"},
		{bytes(0xED, 0xA0, 0x80), "\uFFFD\uFFFD\uFFFD"}, // a surrogate
		{append(append(bytes(0xC3, 0xA9), 260), bytes(0xC3)...), "éa\uFFFD"},
	} {
		if got := tok.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}

// TestNormalizerUnicode9: the normalizers give what the Rust library's Unicode 9.0 normalization
// gives, without Go's Stream-Safe U+034F.
func TestNormalizerUnicode9(t *testing.T) {
	nfc, nfd := normUnicode{norm.NFC}, normUnicode{norm.NFD}
	marks := strings.Repeat("\u0301\u0316", 20) // 40 marks in a row
	for _, c := range []struct {
		n        normUnicode
		in, want string
	}{
		{nfc, "e\u0301", "é"},
		{nfc, "x\u0301\u0316", "x\u0316\u0301"},               // canonical order
		{nfc, "x\u0301\u1DF9", "x\u0301\u1DF9"},               // U+1DF9 (Unicode 10): no class in 9.0
		{nfc, "\U00011935\U00011930", "\U00011935\U00011930"}, // composes from Unicode 13 on
		{nfc, "e\u0301\U0001F97Ae\u0301", "é\U0001F97Aé"},     // later characters split the text
		{nfc, "e" + marks, "é" + strings.Repeat("\u0316", 20) + strings.Repeat("\u0301", 19)},
		{nfd, "é" + marks, "e" + strings.Repeat("\u0316", 20) + strings.Repeat("\u0301", 21)},
		{nfc, "\u1100\u1161\u11A8" + marks, "각" + strings.Repeat("\u0316", 20) + strings.Repeat("\u0301", 20)},
	} {
		if got := c.n.Normalize(c.in); got != c.want {
			t.Errorf("%v(%+q) = %+q, want %+q", c.n.form, c.in, got, c.want)
		}
	}
	// normalizeLong is Go's norm wherever that inserts no U+034F.
	rng := rand.New(rand.NewPCG(9, 9))
	alphabet := []rune("ae\u0301\u0316\u0323\u0302\u05B0\u1100\u1161\u11A8각é\u0344\u212B\uFB01ṩ\u0F73 ")
	for i := 0; i < 5000; i++ {
		r := make([]rune, 1+rng.IntN(12))
		for j := range r {
			r[j] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(r)
		for _, f := range []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD} {
			if got, want := (normUnicode{f}).normalizeLong(s), f.String(s); got != want {
				t.Fatalf("%v: normalizeLong(%+q) = %+q, norm gives %+q", f, s, got, want)
			}
		}
	}
}
