package wordpiece

import (
	"testing"
)

// FuzzEncode checks, on arbitrary (also invalid UTF-8) input, that Encode never panics, frames
// every result with [CLS] ... [SEP], emits only vocabulary ids, and respects the length limit.
func FuzzEncode(f *testing.F) {
	vocab := map[string]int32{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "a": 5, "##a": 6, "b": 7, "##b": 8, "é": 9, ".": 10, "中": 11}
	tok, err := New(vocab, BertUncased())
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "ab.ba", "Éa中b", "[CLS][SEP]x", "a\x00b\xffc", "\u0301\u0301", "[MAS[MASK]K]"} {
		f.Add(s, 0)
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, maxLen int) {
		maxLen %= 600
		ids := tok.Encode(s, maxLen)
		if len(ids) < 2 || ids[0] != 2 || ids[len(ids)-1] != 3 {
			t.Fatalf("Encode(%q) = %v: not framed by [CLS] [SEP]", s, ids)
		}
		if maxLen >= 2 && len(ids) > maxLen {
			t.Fatalf("Encode(%q, %d) has %d ids", s, maxLen, len(ids))
		}
		for _, id := range ids {
			if tok.Token(id) == "" {
				t.Fatalf("Encode(%q) gave id %d outside the vocabulary", s, id)
			}
		}
	})
}

// FuzzParse checks that Parse rejects or accepts arbitrary bytes without panicking, and that an
// accepted tokenizer encodes.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"added_tokens":[],"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":{"type":"BertProcessing","cls":["[CLS]",1],"sep":["[SEP]",2]},"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"a":3}}}`))
	f.Add([]byte(`{"model":{"type":"WordPiece"}}`))
	f.Add([]byte(`{"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":{"type":"BertProcessing","cls":[1,1]},"model":{"type":"WordPiece","vocab":{"":-1}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tok, err := Parse(raw)
		if err != nil {
			return
		}
		ids := tok.Encode("a b", 0)
		if len(ids) < 2 {
			t.Fatalf("accepted tokenizer encodes %v", ids)
		}
	})
}
