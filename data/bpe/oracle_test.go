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

	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/extract"
	"golang.org/x/text/unicode/norm"
)

// The oracle test compares Encode with transformers.js's tokenizer code (the @lenml/tokenizers
// bundle, run by node) on the three real tokenizer.json files scripts/fetch-tokenizers.sh puts in
// the cache, over corpus texts and a hostile set.
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
	cache, err := extract.DefaultCacheDir()
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
	cache, err := extract.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(cache, "corpus")
	if _, err := os.Stat(filepath.Join(corpus, "SOURCES.txt")); err != nil {
		skipOrFail(t, "no corpus in %s", corpus)
	}
	src, err := extract.ReadSource(corpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Texts) < corpusTexts {
		t.Fatalf("corpus %s has %d texts, want at least %d", corpus, len(src.Texts), corpusTexts)
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

// oracleResult is one line of scripts/tokenizer-oracle.mjs.
type oracleResult struct {
	With    []int  `json:"with"`
	Without []int  `json:"without"`
	Decoded string `json:"decoded"`
}

// runOracle runs the node oracle on texts with one tokenizer directory.
func runOracle(t *testing.T, dir string, texts []string) []oracleResult {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range texts {
		if err := enc.Encode(s); err != nil { // invalid UTF-8 goes as U+FFFD per bad byte
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "tokenizer-oracle.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, filepath.Join(tokenizersDir(t), "lenml-tokenizers"), dir)
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	var res []oracleResult
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var r oracleResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("oracle line %d: %v", len(res)+1, err)
		}
		res = append(res, r)
	}
	if len(res) != len(texts) {
		t.Fatalf("oracle gave %d lines for %d texts", len(res), len(texts))
	}
	return res
}

// TestMatchesTransformersJS asserts identical ids (with and without special tokens) and decoded
// text for every text, on all three real tokenizers.
func TestMatchesTransformersJS(t *testing.T) {
	if testing.Short() {
		t.Skip("the oracle test runs node on 5,000+ texts")
	}
	dir := tokenizersDir(t)
	if _, err := os.Stat(filepath.Join(dir, "lenml-tokenizers", "dist", "main.mjs")); err != nil {
		skipOrFail(t, "no transformers.js tokenizer code in %s", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node is not on PATH")
	}
	base := oracleTexts(t)
	for _, name := range realTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			texts := append(slices.Clip(base), addedTokenTexts(t, filepath.Join(dir, name, "tokenizer.json"))...)
			want := runOracle(t, filepath.Join(dir, name), texts)
			same, bad := 0, 0
			for i, text := range texts {
				with, err := tok.Encode(text, true)
				if err != nil {
					t.Fatalf("text %d %q: %v", i, text, err)
				}
				without, err := tok.Encode(text, false)
				if err != nil {
					t.Fatalf("text %d %q: %v", i, text, err)
				}
				dec := ""
				if len(without) > 0 {
					dec = tok.Decode(without)
				}
				if i < corpusTexts {
					// Corpus texts round-trip (Qwen's NFC normalizer aside, which these keep).
					if dec != norm.NFC.String(text) && dec != text {
						t.Errorf("text %d: Decode(Encode(%q)) = %q", i, clip(text), clip(dec))
					}
				}
				if slices.Equal(with, want[i].With) && slices.Equal(without, want[i].Without) && dec == want[i].Decoded {
					same++
					continue
				}
				if bad++; bad <= 8 {
					t.Errorf("text %d %q:\n with    %v\n want    %v\n without %v\n want    %v\n decoded %q\n want    %q",
						i, clip(text), with, want[i].With, without, want[i].Without, clip(dec), clip(want[i].Decoded))
				}
			}
			t.Logf("%s: %d/%d texts identical (%d corpus + %d hostile, %d of them about its added tokens)",
				name, same, len(texts), corpusTexts, len(texts)-corpusTexts, len(texts)-len(base))
			if bad > 0 {
				t.Errorf("%s: %d texts differ", name, bad)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
