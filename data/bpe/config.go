package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
)

// configJSON is the part of tokenizer_config.json this package reads.
type configJSON struct {
	TokenizerClass          string               `json:"tokenizer_class"`
	AddBOSToken             *bool                `json:"add_bos_token"`
	AddEOSToken             *bool                `json:"add_eos_token"`
	BOSToken                json.RawMessage      `json:"bos_token"`
	EOSToken                json.RawMessage      `json:"eos_token"`
	AddedTokensDecoder      map[string]addedJSON `json:"added_tokens_decoder"`
	AdditionalSpecialTokens []json.RawMessage    `json:"additional_special_tokens"`
}

// tokenName reads a token named in tokenizer_config.json: a string, or an object with "content".
func tokenName(raw json.RawMessage) (string, bool) {
	if !isSet(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content, o.Content != ""
	}
	return "", false
}

// config applies tokenizer_config.json: the BOS token, and for Llama tokenizers the
// add_bos_token/add_eos_token choice, which transformers' LlamaTokenizerFast writes into the
// post-processor when it loads.
func (l *loader) config(t *Tokenizer, cfg *configJSON) error {
	if cfg == nil {
		if len(t.prefix) > 0 {
			t.bos = int32(t.prefix[0])
		}
		return nil
	}
	cerr := func(field, format string, args ...any) error {
		return fmt.Errorf("bpe: %s: %s: %s", l.cfgPath, field, fmt.Sprintf(format, args...))
	}
	lookup := func(field string, raw json.RawMessage) (int32, bool, error) {
		name, ok := tokenName(raw)
		if !ok {
			return -1, false, nil
		}
		id, ok := t.vocab[name]
		if !ok {
			return -1, false, cerr(field, "%q is not a token of %s", name, l.path)
		}
		return id, true, nil
	}
	bos, hasBOS, err := lookup("bos_token", cfg.BOSToken)
	if err != nil {
		return err
	}
	eos, hasEOS, err := lookup("eos_token", cfg.EOSToken)
	if err != nil {
		return err
	}
	if hasBOS {
		t.bos = bos
	} else if len(t.prefix) > 0 {
		t.bos = int32(t.prefix[0])
	}
	for _, raw := range cfg.AdditionalSpecialTokens {
		if name, ok := tokenName(raw); ok {
			if id, ok := t.vocab[name]; ok {
				t.specialIDs[id] = true
			}
		}
	}
	switch strings.TrimSuffix(cfg.TokenizerClass, "Fast") {
	case "LlamaTokenizer", "CodeLlamaTokenizer":
		if cfg.AddBOSToken == nil && cfg.AddEOSToken == nil {
			return nil
		}
		addBOS := cfg.AddBOSToken == nil || *cfg.AddBOSToken
		addEOS := cfg.AddEOSToken != nil && *cfg.AddEOSToken
		t.prefix, t.suffix = nil, nil
		if addBOS {
			if !hasBOS {
				return cerr("add_bos_token", "is true but bos_token names no token")
			}
			t.prefix = []int{int(bos)}
		}
		if addEOS {
			if !hasEOS {
				return cerr("add_eos_token", "is true but eos_token names no token")
			}
			t.suffix = []int{int(eos)}
		}
	}
	return nil
}
