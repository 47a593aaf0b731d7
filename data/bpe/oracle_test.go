package bpe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/corpus"
	"golang.org/x/text/unicode/norm"
)

// The oracle tests compare Encode and Decode with Hugging Face's Rust tokenizers (npm tokenizers,
// its Node binding) and transformers.js's tokenizer code (the @lenml/tokenizers bundle), both run
// by node, on the three real tokenizer.json files scripts/fetch-tokenizers.sh puts in the cache,
// over corpus texts, a hostile set and a sweep of every code point.
const (
	envTokenizers        = "GELOATTACK_TOKENIZERS"
	envRequireTokenizers = "GELOATTACK_REQUIRE_TOKENIZERS"
	corpusTexts          = 5000
)

var realTokenizers = []string{"llama2", "llama3", "qwen3"}

// tokenizersDir is $GELOATTACK_TOKENIZERS, else the cache's tokenizers/ directory.
func tokenizersDir(t *testing.T) string {
	if d := os.Getenv(envTokenizers); d != "" {
		return d
	}
	cache, err := corpus.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "tokenizers")
}

// skipOrFail skips with the reason, or fails when the environment requires the tokenizers.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(envRequireTokenizers) == "1" {
		t.Fatalf("%s (%s=1)", msg, envRequireTokenizers)
	}
	t.Skipf("%s; run scripts/fetch-tokenizers.sh (and scripts/fetch-data.sh corpus) to run it", msg)
}

// realTokenizer loads one of the fetched tokenizers, skipping when it is absent.
func realTokenizer(t *testing.T, name string) *bpe.Tokenizer {
	t.Helper()
	path := filepath.Join(tokenizersDir(t), name, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, "no %s", path)
	}
	tok, err := bpe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// oracleTexts is corpusTexts texts of the corpora (the mix every prefix of ReadSource is) and the
// hostile set.
func oracleTexts(t *testing.T) []string {
	cache, err := corpus.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	corpusDir := filepath.Join(cache, "corpus")
	if _, err := os.Stat(filepath.Join(corpusDir, "SOURCES.txt")); err != nil {
		skipOrFail(t, "no corpus in %s", corpusDir)
	}
	src, err := corpus.ReadSource(corpusDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Texts) < corpusTexts {
		t.Fatalf("corpus %s has %d texts, want at least %d", corpusDir, len(src.Texts), corpusTexts)
	}
	var texts []string
	for _, x := range src.Texts[:corpusTexts] {
		texts = append(texts, x.Text)
	}
	return append(texts, hostileTexts()...)
}

// hostileTexts are texts that exercise every branch of the pre-tokenizer regexes, the added-token
// matching, normalization and byte fallback, plus random mixes of them from a seeded stream.
func hostileTexts() []string {
	texts := []string{
		"", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t x", "   leading", "trailing   ",
		"a  b   c    d     e", "\r\n", "line1\r\nline2", "a\r\rb", "x \n y", "x\n \ny", " \n \n ",
		"\u00a0", "\u00a0x", "\u3000x", "x\u0085y", "\ufeffx", "a\u2028b", "\u2000\u200a a", "\v\f",
		"tab\there", "end\t", "  \t\n  x", "word\n\n\n   next", "!!!\n\n", " ?!\r\n\r\n",
		"café naïve résumé Ångström", "e\u0301 vs é", "Zu\u0308rich", "ﬁnance ﬂow", "ǅemal",
		"日本語のテキストです。", "中文字符测试，标点！", "한국어 텍스트", "\u1100\u1161\u11a8",
		"Привет, мир!", "مرحبا بالعالم", "שָׁלוֹם", "हिन्दी भाषा", "ภาษาไทย", "Ελληνικά",
		"👍🏽", "👨\u200d👩\u200d👧\u200d👦 family", "🇺🇸🇫🇷", "❤️ love", "🤖🤖🤖", "a😀b",
		"\x00", "\x01\x02\x1f", "\x7f", "a\x00b", "\x1b[31mred\x1b[0m", "\u200b\u200d\u2060",
		"a\u0300\u0301\u0302", "x\u20dd", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚𝟛𝟜", "①②③", "Ⅻ", "٣٤٥", "१२३",
		"12345678901234567890", "3.14159265358979", "1,000,000", "0x1F", "1e-10", "v1.2.3",
		"I'm", "DON'T", "we'LL", "it's", "'s", "''s", "You're", "'RE", "'Ve'm'd", "'x", "rock'n'roll",
		"▁", "▁▁x", "Ġ", "Ċ", "<0x41>", "<unk>x", "<s", "</s", "<|im_start", "<|begin_of_text",
		"<s><s>", "a<s>b", "</s> </s>", "<s> hello", "hello <s>", "<|begin_of_text|>Hello",
		"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>",
		"<|endoftext|><|endoftext|>", "<|reserved_special_token_5|>", "<|eot_id|>",
		"http://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Users\\x", "$$$ %%% ^^^",
		"((()))", "[[a]]", "{\"json\": [1, 2, 3]}", "def f(x):\n    return x ** 2\n", "<html><body>",
		"— – - ‒", "…", "«quoted» „German“", "'single' \"double\"",
		"\xff\xfe", "abc\xc3", "\xe2\x82", "ok\xc0\xafok", "\xed\xa0\x80",
		// Where the Rust library and transformers.js differ: \s, the contractions' case folding,
		// Unicode 16 letters and digits, normalization data and long runs of marks.
		"x\u0085!", "x \u0085 y", "\u0085\u0085\n", "\ufeff!", "a\ufeff\ufeff b", "it'ſ", "IT'ſ a'ſſ",
		"𐵊𐵋𐵌 𞗐𞗑 \U0001E5F1\U0001E5F2\U0001E5F3\U0001E5F4", "x\u0301\u1DF9", "\U00016D67\U00016D67",
		"\U00011935\U00011930", "e" + strings.Repeat("\u0301\u0316", 40) + " zalgo",
		strings.Repeat("a", 3000), strings.Repeat(" ", 1000), strings.Repeat("ab", 1500),
		strings.Repeat("9", 1001), strings.Repeat("\n", 500), strings.Repeat("é", 700),
		strings.Repeat("日本", 400), strings.Repeat("the ", 600), strings.Repeat("👍", 300),
		strings.Repeat("<s>", 50), strings.Repeat(" \t\n", 200),
	}
	pieces := []string{
		"a", "Z", "é", "e\u0301", "日", "한", "ß", "İ", "ſ", "K", "1", "23", "٣", "①", " ", "  ", "\t",
		"\n", "\r", "\r\n", "\u00a0", "\u3000", "\u0085", "\ufeff", "!", "?", ".", ",", "'", "'s",
		"'LL", "\"", "-", "_", "@", "#", "😀", "🏽", "\u200d", "\x00", "\x1f", "word", " the",
		"<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<think>", "▁",
		"Ġ", "<0x0A>", "ﬁ", "𝔘", "𝟙",
	}
	rng := rand.New(rand.NewPCG(26, 1))
	for i := 0; i < 600; i++ {
		var b strings.Builder
		for n := 1 + rng.IntN(24); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// addedTokenTexts are texts made of a tokenizer's own added tokens: each alone, glued to words,
// between spaces, and all of them in a row.
func addedTokenTexts(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		AddedTokens []struct {
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var all strings.Builder
	for _, a := range f.AddedTokens {
		c := a.Content
		texts = append(texts, c, "x"+c+"y", " "+c+" ", "\n"+c+"\n\n", c[:len(c)-1])
		all.WriteString(c)
	}
	return append(texts, all.String())
}

// oracleResult is one line of an oracle script (scripts/tokenizer-oracle*.mjs).
type oracleResult struct {
	With    []int  `json:"with"`
	Without []int  `json:"without"`
	Decoded string `json:"decoded"`
	// Pretokens, from the Rust oracle with --pretokens: the pre-tokenizer's pieces of the
	// normalized text.
	Pretokens []string `json:"pretokens"`
}

// sameIDs reports whether two results have the same ids with and without special tokens.
func (r oracleResult) sameIDs(o oracleResult) bool {
	return slices.Equal(r.With, o.With) && slices.Equal(r.Without, o.Without)
}

// oracle is one reference implementation: a node script and the library directory (in the
// tokenizers directory) it loads.
type oracle struct {
	name   string
	script string // in scripts/
	lib    string // in tokenizersDir
	probe  string // a file of lib that must exist
}

var (
	// oracleJS is transformers.js's tokenizer code (@lenml/tokenizers).
	oracleJS = oracle{"transformers.js", "tokenizer-oracle.mjs", "lenml-tokenizers", "dist/main.mjs"}
	// oracleRust is Hugging Face's Rust tokenizers through its Node binding (npm tokenizers): the
	// reference wherever the two disagree.
	oracleRust = oracle{"tokenizers (Rust)", "tokenizer-oracle-rust.mjs", "hf-tokenizers", "index.js"}
)

// need skips (or fails, when the tokenizers are required) when the oracle cannot run here.
func (o oracle) need(t *testing.T) {
	t.Helper()
	probe := filepath.Join(tokenizersDir(t), o.lib, filepath.FromSlash(o.probe))
	if _, err := os.Stat(probe); err != nil {
		skipOrFail(t, "no %s code: %s", o.name, probe)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node is not on PATH")
	}
}

// runOracle runs the oracle with one tokenizer directory on inputs, one JSON line each: texts, or,
// for the Rust oracle, id lists to decode. args go to the script.
func runOracle[T any](t *testing.T, o oracle, dir string, inputs []T, args ...string) []oracleResult {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range inputs {
		if err := enc.Encode(s); err != nil { // invalid UTF-8 goes as U+FFFD per bad byte
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", o.script))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	argv := append([]string{script, filepath.Join(tokenizersDir(t), o.lib), dir}, args...)
	cmd := exec.CommandContext(ctx, "node", argv...)
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	var res []oracleResult
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var r oracleResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", o.name, len(res)+1, err)
		}
		res = append(res, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", o.name, err)
	}
	if len(res) != len(inputs) {
		t.Fatalf("%s gave %d lines for %d inputs", o.name, len(res), len(inputs))
	}
	return res
}

// goResult is what the oracles report, from the Go tokenizer.
func goResult(t *testing.T, tok *bpe.Tokenizer, text string) oracleResult {
	t.Helper()
	with, err := tok.Encode(text, true)
	if err != nil {
		t.Fatalf("%q: %v", clip(text), err)
	}
	without, err := tok.Encode(text, false)
	if err != nil {
		t.Fatalf("%q: %v", clip(text), err)
	}
	dec := ""
	if len(without) > 0 {
		dec = tok.Decode(without)
	}
	return oracleResult{With: with, Without: without, Decoded: dec}
}

// TestMatchesOracles asserts identical ids (with and without special tokens) and decoded text
// for every text, on all three real tokenizers, against Hugging Face's Rust tokenizers; and
// against transformers.js wherever transformers.js agrees with the Rust library. Where the two
// references disagree, the Rust library is the reference; each such text must be one of the
// known differences of transformers.js (jsDifference), and they are logged.
func TestMatchesOracles(t *testing.T) {
	if testing.Short() {
		t.Skip("the oracle test runs node on 5,000+ texts")
	}
	oracleRust.need(t)
	oracleJS.need(t)
	dir := tokenizersDir(t)
	base := oracleTexts(t)
	for _, name := range realTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			texts := append(slices.Clip(base), addedTokenTexts(t, filepath.Join(dir, name, "tokenizer.json"))...)
			rust := runOracle(t, oracleRust, filepath.Join(dir, name), texts)
			js := runOracle(t, oracleJS, filepath.Join(dir, name), texts)
			same, bad, jsIDs, jsDecoded := 0, 0, 0, 0
			reasons := map[string]int{}
			for i, text := range texts {
				got := goResult(t, tok, text)
				if i < corpusTexts {
					// Corpus texts round-trip (Qwen's NFC normalizer aside, which these keep).
					if got.Decoded != norm.NFC.String(text) && got.Decoded != text {
						t.Errorf("text %d: Decode(Encode(%q)) = %q", i, clip(text), clip(got.Decoded))
					}
				}
				want := rust[i]
				if !js[i].sameIDs(want) || js[i].Decoded != want.Decoded {
					if js[i].sameIDs(want) {
						jsDecoded++
					} else {
						jsIDs++
					}
					why := jsDifference(tok, text)
					reasons[why]++
					if why == "" {
						t.Errorf("text %d %q: transformers.js and the Rust library disagree for no known reason:\n js   %v %q\n rust %v %q",
							i, clip(text), js[i].Without, clip(js[i].Decoded), want.Without, clip(want.Decoded))
					} else if reasons[why] <= 2 {
						t.Logf("text %d %q: transformers.js differs from the Rust library (%s):\n js   %v %q\n rust %v %q",
							i, clip(text), why, js[i].Without, clip(js[i].Decoded), want.Without, clip(want.Decoded))
					}
				}
				if got.sameIDs(want) && got.Decoded == want.Decoded {
					same++
					continue
				}
				if bad++; bad <= 8 {
					t.Errorf("text %d %q:\n with    %v\n want    %v\n without %v\n want    %v\n decoded %q\n want    %q",
						i, clip(text), got.With, want.With, got.Without, want.Without, clip(got.Decoded), clip(want.Decoded))
				}
			}
			t.Logf("%s: %d/%d texts identical to the Rust library (%d corpus + %d hostile, %d of them about its added tokens); "+
				"transformers.js differs from it on %d (ids) + %d (decoded text only): %v",
				name, same, len(texts), corpusTexts, len(texts)-corpusTexts, len(texts)-len(base), jsIDs, jsDecoded, reasons)
			if bad > 0 {
				t.Errorf("%s: %d texts differ from the Rust library", name, bad)
			}
		})
	}
}

// jsDifference names the known reason transformers.js differs from the Rust library on text, or
// returns "".
func jsDifference(tok *bpe.Tokenizer, text string) string {
	switch {
	case tok.Kind() == bpe.KindByteLevel && strings.ContainsAny(text, "\u0085\ufeff"):
		return "U+0085 is \\s in Rust, U+FEFF in JavaScript"
	case tok.Kind() == bpe.KindByteLevel && strings.Contains(text, "'ſ"):
		return "Rust's contractions fold case by Unicode ('ſ is 's), transformers.js's by ASCII"
	case tok.Normalize("e\u0301") == "é" && (tok.Normalize(text) != norm.NFC.String(text) || hasAfter9(text)):
		return "normalization: Rust has Unicode 9.0 data, JavaScript its own"
	}
	return ""
}

// hasAfter9 reports whether text has a character Unicode 9.0 does not have.
func hasAfter9(text string) bool {
	tables, _, _ := bpe.UnicodeTables()
	return strings.IndexFunc(text, func(r rune) bool { return unicode.Is(tables["unassigned-9.0"], r) }) >= 0
}

// TestDecodeMatchesRust asserts Decode gives the Rust library's text for id sequences no encoding
// gives: random ids (added tokens, byte tokens and pieces of characters among them) and, for the
// byte-fallback tokenizer, every byte token alone and runs of them, valid UTF-8 or not.
func TestDecodeMatchesRust(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	oracleRust.need(t)
	dir := tokenizersDir(t)
	for _, name := range realTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			var seqs [][]int
			byteID := func(b int) int {
				id, ok := tok.TokenID(fmt.Sprintf("<0x%02X>", b))
				if !ok {
					return -1
				}
				return id
			}
			if byteID(0) >= 0 {
				for b := 0; b < 256; b++ {
					seqs = append(seqs, []int{byteID(b)})
				}
				for _, run := range [][]int{
					{0xE2, 0x82, 0xAC}, {0xE2, 0x82}, {0xE2, 0x82, 0x41}, {0x41, 0xE2, 0x82}, {0xF0, 0x9F, 0x98, 0x80},
					{0xF0, 0x9F, 0x98}, {0xC0, 0xAF}, {0xED, 0xA0, 0x80}, {0xFF, 0xFE}, {0x41, 0x80, 0x42}, {0xC3, 0xA9, 0xC3},
				} {
					var ids []int
					for _, b := range run {
						ids = append(ids, byteID(b))
					}
					word, _ := tok.TokenID("▁the")
					seqs = append(seqs, ids, append([]int{word}, ids...), append(slices.Clip(ids), word))
				}
			}
			added := addedIDs(t, filepath.Join(dir, name, "tokenizer.json"))
			rng := rand.New(rand.NewPCG(37, 7))
			for i := 0; i < 3000; i++ {
				ids := make([]int, 1+rng.IntN(16))
				for j := range ids {
					switch k := rng.IntN(10); {
					case k == 0 && len(added) > 0:
						ids[j] = added[rng.IntN(len(added))]
					case k < 4 && byteID(0) >= 0:
						ids[j] = byteID(rng.IntN(256))
					default:
						ids[j] = rng.IntN(tok.VocabSize())
					}
				}
				seqs = append(seqs, ids)
			}
			want := runOracle(t, oracleRust, filepath.Join(dir, name), seqs)
			bad := 0
			for i, ids := range seqs {
				if got := tok.Decode(ids); got != want[i].Decoded {
					if bad++; bad <= 8 {
						t.Errorf("Decode(%v) = %q, want %q", ids, got, want[i].Decoded)
					}
				}
			}
			t.Logf("%s: %d/%d id sequences decode as the Rust library decodes them", name, len(seqs)-bad, len(seqs))
		})
	}
}

// addedIDs are the ids of a tokenizer.json's added tokens.
func addedIDs(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		AddedTokens []struct {
			ID int `json:"id"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, a := range f.AddedTokens {
		ids = append(ids, a.ID)
	}
	return ids
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// TestAddedTokensMatchRust runs a hand-made tokenizer with added tokens of every flag through Go
// and the Rust library: which whitespace lstrip and rstrip take, and which neighbours make a
// single_word token part of a word (the regex crate's \w), are the Rust library's.
func TestAddedTokensMatchRust(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	oracleRust.need(t)
	dir := t.TempDir()
	b, err := json.Marshal(bpe.AddedFlagsJSON())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := bpe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	neighbours := []string{"", " ", "  ", "\t", "\n", "\u0085", "\ufeff", "\u00a0", "\u3000", "\u2028", "\u200b",
		"a", "_", "1", "①", "Ⅻ", "é", "e\u0301", "\u0301", "\u200d", "\u200c", "日", "-", "'", "😀", "\u0903", "\U00010D4A"}
	for _, tokText := range []string{"<L>", "<R>", "<LR>", "ab", "<W>", "<|end|>"} {
		for _, l := range neighbours {
			for _, r := range neighbours {
				texts = append(texts, l+tokText+r, "x"+l+tokText+r+"y")
			}
		}
	}
	texts = append(texts, "<R>  <L>", "<LR> \t <LR>", "ab ab", "abab", "<W><W>", "a<W> <W>b")
	want := runOracle(t, oracleRust, dir, texts)
	bad := 0
	for i, text := range texts {
		got := goResult(t, tok, text)
		if got.sameIDs(want[i]) && got.Decoded == want[i].Decoded {
			continue
		}
		if bad++; bad <= 8 {
			t.Errorf("%q: ids %v, decoded %q; want %v, %q", text, got.Without, got.Decoded, want[i].Without, want[i].Decoded)
		}
	}
	t.Logf("%d/%d texts identical to the Rust library", len(texts)-bad, len(texts))
}
