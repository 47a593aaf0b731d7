package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// idsTokenizer is a tokenizer.json of n single-token words (ids 0..n-1) and added tokens at the
// given ids.
func idsTokenizer(n int, added ...int) []byte {
	vocab := map[string]int{}
	for i := 0; i < n; i++ {
		vocab[fmt.Sprintf("w%d", i)] = i
	}
	var list []any
	for i, id := range added {
		list = append(list, map[string]any{"id": id, "content": fmt.Sprintf("<x%d>", i), "special": true})
	}
	js, _ := json.Marshal(map[string]any{"added_tokens": list, "model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}}})
	return js
}

// No table is sized by an id the files do not pay for: an id of 2^30-1 among 300 tokens (which
// sized a 16 GiB id table) is refused, in model.vocab, added_tokens or added_tokens_decoder, and
// ParseFor refuses any id at or past the model's vocab_size. Dense ids, and small gaps, pass.
func TestIDsBoundedBeforeTables(t *testing.T) {
	sparseVocab := strings.Replace(string(idsTokenizer(300)), `"w7":7`, `"w7":1073741823`, 1)
	sparseCfg := `{"added_tokens_decoder": {"1073741823": {"content": "<far>", "special": true}}}`
	for name, tc := range map[string]struct {
		tj, cfg string
		vocab   int
		want    string
	}{
		"model.vocab":          {sparseVocab, "", 0, `model.vocab: token "w7": id 1073741823 among 300 listed tokens`},
		"added_tokens":         {string(idsTokenizer(300, 300, 1<<30-1)), "", 0, "added_tokens[1].id: id 1073741823 among 302 listed tokens"},
		"added_tokens_decoder": {string(idsTokenizer(300)), sparseCfg, 0, "added_tokens_decoder.1073741823.id: id 1073741823 among 301"},
		"past vocab_size":      {string(idsTokenizer(300)), "", 256, `token "w299": id 299 is outside the model's vocabulary (config.json vocab_size = 256)`},
		"added past vocab":     {string(idsTokenizer(300, 300)), "", 300, "added_tokens[0].id: id 300 is outside the model's vocabulary"},
	} {
		var cfg []byte
		if tc.cfg != "" {
			cfg = []byte(tc.cfg)
		}
		var err error
		if tc.vocab > 0 {
			_, err = ParseFor([]byte(tc.tj), cfg, "tok.json", tc.vocab)
		} else {
			_, err = Parse([]byte(tc.tj), cfg, "tok.json")
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		tj    []byte
		vocab int
	}{
		"dense":                {idsTokenizer(300, 300, 301), 302},
		"padded vocab_size":    {idsTokenizer(300), 320},
		"reserved gap":         {idsTokenizer(300, 1500), 0},
		"added past the vocab": {idsTokenizer(300, 300), 0},
	} {
		var tok *Tokenizer
		var err error
		if tc.vocab > 0 {
			tok, err = ParseFor(tc.tj, nil, "tok.json", tc.vocab)
		} else {
			tok, err = Parse(tc.tj, nil, "tok.json")
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if tc.vocab > 0 && tok.VocabSize() > tc.vocab {
			t.Errorf("%s: %d ids for vocab_size %d", name, tok.VocabSize(), tc.vocab)
		}
	}
}
