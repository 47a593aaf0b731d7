package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// modelJSON is tokenizer.json's "model" object. BPE is the only model this package implements
// (WordPiece is data/wordpiece's), so there is no model registry: the Tokenizer is the BPE model.
type modelJSON struct {
	Type                    *string         `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// model reads the BPE model into t: its vocabulary, merges and settings.
func (l *loader) model(t *Tokenizer, raw json.RawMessage) error {
	if !isSet(raw) {
		return l.errf("model", "missing")
	}
	var m modelJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return l.errf("model", "%v", err)
	}
	if m.Type == nil {
		return l.errf("model.type", "missing (want \"BPE\")")
	}
	if *m.Type != "BPE" {
		return l.errf("model.type", "%q is not supported (want \"BPE\"; WordPiece is data/wordpiece's)", *m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return l.errf("model.dropout", "%v: BPE dropout is random; only null or 0 is supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return l.errf("model.continuing_subword_prefix", "%q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return l.errf("model.end_of_word_suffix", "%q is not supported", *m.EndOfWordSuffix)
	}
	if len(m.Vocab) == 0 {
		return l.errf("model.vocab", "missing or empty")
	}
	l.listed += len(m.Vocab)
	maxID, maxTok := -1, ""
	for tok, id := range m.Vocab {
		if id < 0 {
			return l.errf("model.vocab", "token %q has id %d", tok, id)
		}
		if tok == "" {
			return l.errf("model.vocab", "empty token (id %d)", id)
		}
		if id > maxID {
			maxID, maxTok = id, tok
		}
	}
	// The largest id sizes the id table: it is checked before the table, or any map, is made.
	if err := l.checkID(maxID); err != nil {
		return l.errf("model.vocab", "token %q: %v", maxTok, err)
	}
	t.vocab = make(map[string]int32, len(m.Vocab)+512)
	for tok, id := range m.Vocab {
		t.vocab[tok] = int32(id)
	}
	t.tokens = make([]string, maxID+1) // at most 2 x listed + idSlack entries
	for tok, id := range m.Vocab {
		if prev := t.tokens[id]; prev != "" {
			return l.errf("model.vocab", "id %d is used by both %q and %q", id, prev, tok)
		}
		t.tokens[id] = tok
	}
	if err := l.merges(t, m.Merges); err != nil {
		return err
	}
	t.ignoreMerges = m.IgnoreMerges
	t.byteFallback = m.ByteFallback
	t.fuseUnk = m.FuseUnk
	for b := range t.byteTok {
		t.byteTok[b] = -1
		if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteTok[b] = id
		}
	}
	if m.UnkToken != nil {
		id, ok := t.vocab[*m.UnkToken]
		if !ok {
			return l.errf("model.unk_token", "%q is not in model.vocab", *m.UnkToken)
		}
		t.unk = id
	}
	return nil
}

// merges reads model.merges in either form tokenizers writes: "left right" strings (before 0.20)
// or [left, right] pairs. Both sides and their concatenation must be vocabulary tokens.
func (l *loader) merges(t *Tokenizer, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if !isSet(raw) {
		return l.errf("model.merges", "missing")
	}
	var pairs [][2]string
	inner := bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("[")))
	if len(inner) > 0 && inner[0] == '"' {
		var lines []string
		if err := json.Unmarshal(raw, &lines); err != nil {
			return l.errf("model.merges", "%v", err)
		}
		pairs = make([][2]string, len(lines))
		for i, s := range lines {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") || a == "" || b == "" {
				return l.errf(fmt.Sprintf("model.merges[%d]", i), "%q is not two tokens separated by one space", s)
			}
			pairs[i] = [2]string{a, b}
		}
	} else {
		var list [][]string
		if err := json.Unmarshal(raw, &list); err != nil {
			return l.errf("model.merges", "%v", err)
		}
		pairs = make([][2]string, len(list))
		for i, p := range list {
			if len(p) != 2 {
				return l.errf(fmt.Sprintf("model.merges[%d]", i), "has %d parts, want 2", len(p))
			}
			pairs[i] = [2]string{p[0], p[1]}
		}
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for i, p := range pairs {
		field := func() string { return fmt.Sprintf("model.merges[%d]", i) }
		a, ok := t.vocab[p[0]]
		if !ok {
			return l.errf(field(), "%q is not in model.vocab", p[0])
		}
		b, ok := t.vocab[p[1]]
		if !ok {
			return l.errf(field(), "%q is not in model.vocab", p[1])
		}
		ab, ok := t.vocab[p[0]+p[1]]
		if !ok {
			return l.errf(field(), "the merged token %q is not in model.vocab", p[0]+p[1])
		}
		key := uint64(uint32(a))<<32 | uint64(uint32(b))
		if _, dup := t.merges[key]; dup {
			continue // a repeated rule never applies: the earlier rank always wins
		}
		t.merges[key] = merge{rank: int32(i), id: ab}
	}
	return nil
}
