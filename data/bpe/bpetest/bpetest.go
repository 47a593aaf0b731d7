// Package bpetest builds small tokenizer.json documents whose ids can be worked out by hand, for
// the tests of data/bpe and of the commands that tokenize with it. Only tests import it.
package bpetest

import "fmt"

// SentencePiece is a SentencePiece-style tokenizer.json as Llama-2's is laid out: the specials
// <unk> <s> </s> (ids 0..2), the 256 byte-fallback tokens <0x00>..<0xFF> (3..258), then pieces
// from id 259, with merges in rank order ("a b"). The normalizer prepends "▁" and turns spaces
// into "▁", the post-processor puts <s> first, and the decoder undoes all three.
func SentencePiece(pieces, merges []string) map[string]any {
	vocab := map[string]any{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 3 + b
	}
	for i, p := range pieces {
		vocab[p] = 259 + i
	}
	ranked := make([]any, len(merges))
	for i, m := range merges {
		ranked[i] = m
	}
	special := func(id int, content string) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}
	}
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": []any{special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{
			"type":           "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true,
			"vocab":  vocab,
			"merges": ranked,
		},
	}
}

// Letters is SentencePiece over "▁" (259) and the letters a-z (260..285), without merges: every
// word is one token a letter.
func Letters() map[string]any {
	pieces := []string{"▁"}
	for c := 'a'; c <= 'z'; c++ {
		pieces = append(pieces, string(c))
	}
	return SentencePiece(pieces, nil)
}
