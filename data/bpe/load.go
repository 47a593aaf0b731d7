package bpe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// fileJSON is the part of tokenizer.json this package reads; components stay raw until their
// "type" is known.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    json.RawMessage `json:"truncation"`
}

type addedJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

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

// loader carries the file names into every error.
type loader struct {
	path    string // tokenizer.json
	cfgPath string // tokenizer_config.json ("" when absent)
}

// errf is a refusal naming the file and the JSON field.
func (l *loader) errf(field, format string, args ...any) error {
	return fmt.Errorf("bpe: %s: %s: %s", l.path, field, fmt.Sprintf(format, args...))
}

// Load reads a tokenizer.json, and the tokenizer_config.json in the same directory when there is
// one (bos/eos tokens, add_bos_token/add_eos_token for Llama tokenizers, extra special tokens).
// Every component it does not implement is refused, naming the file and field.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	var cfg *configJSON
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if b, err := os.ReadFile(cfgPath); err == nil {
		cfg = new(configJSON)
		if err := json.Unmarshal(b, cfg); err != nil {
			return nil, fmt.Errorf("bpe: %s: %w", cfgPath, err)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		cfgPath = ""
	} else {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	return parse(data, cfg, &loader{path: path, cfgPath: cfgPath})
}

// Parse builds a tokenizer from tokenizer.json bytes and, optionally, tokenizer_config.json bytes
// (nil: none); name is used in errors in place of a path.
func Parse(tokenizerJSON, tokenizerConfig []byte, name string) (*Tokenizer, error) {
	l := &loader{path: name}
	var cfg *configJSON
	if tokenizerConfig != nil {
		l.cfgPath = "tokenizer_config.json"
		cfg = new(configJSON)
		if err := json.Unmarshal(tokenizerConfig, cfg); err != nil {
			return nil, fmt.Errorf("bpe: %s: tokenizer_config.json: %w", name, err)
		}
	}
	return parse(tokenizerJSON, cfg, l)
}

func parse(data []byte, cfg *configJSON, l *loader) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", l.path, err)
	}
	sum := sha256.Sum256(data)
	t := &Tokenizer{
		path:       l.path,
		hash:       hex.EncodeToString(sum[:]),
		unk:        -1,
		bos:        -1,
		cache:      make(map[string][]int32),
		specialIDs: make(map[int32]bool),
		addedByID:  make(map[int32]addedToken),
	}
	if isSet(f.Truncation) {
		return nil, l.errf("truncation", "is set; this package encodes whole texts (set it to null)")
	}
	if err := l.model(t, f.Model); err != nil {
		return nil, err
	}
	if err := l.addedTokens(t, f.AddedTokens, cfg); err != nil {
		return nil, err
	}
	var err error
	if t.normalizers, err = l.normalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	byteLevel := false
	if t.preTok, err = l.preTokenizer(f.PreTokenizer, "pre_tokenizer", &byteLevel); err != nil {
		return nil, err
	}
	if byteLevel {
		t.kind = KindByteLevel
	} else {
		t.kind = KindSentencePiece
		if len(t.preTok) == 0 && mergesStayInWords(t) {
			t.preTok = []preStep{func(pieces []string, _ bool) []string {
				out := make([]string, 0, len(pieces)*8)
				for _, p := range pieces {
					out = splitWords(p, out)
				}
				return out
			}}
		}
	}
	if t.decoders, err = l.decoder(t, f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	if err := l.postProcessor(t, f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if err := l.config(t, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// isSet reports whether a raw JSON value is present and not null.
func isSet(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// sequence reads a Sequence component: the list under key, each item read by each (its field
// path given), the steps of all items in order.
func sequence[T any](l *loader, raw json.RawMessage, field, key string, each func(item json.RawMessage, field string) ([]T, error)) ([]T, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, l.errf(field, "%v", err)
	}
	var items []json.RawMessage
	if v, ok := c[key]; ok && isSet(v) {
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, l.errf(field+"."+key, "%v", err)
		}
	}
	var out []T
	for i, item := range items {
		steps, err := each(item, fmt.Sprintf("%s.%s[%d]", field, key, i))
		if err != nil {
			return nil, err
		}
		out = append(out, steps...)
	}
	return out, nil
}

// typeOf reads the "type" of a component.
func (l *loader) typeOf(raw json.RawMessage, field string) (string, error) {
	var c struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", l.errf(field, "%v", err)
	}
	if c.Type == nil {
		return "", l.errf(field+".type", "missing")
	}
	return *c.Type, nil
}

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
	t.vocab = make(map[string]int32, len(m.Vocab)+512)
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 || id >= 1<<30 {
			return l.errf("model.vocab", "token %q has id %d", tok, id)
		}
		if tok == "" {
			return l.errf("model.vocab", "empty token (id %d)", id)
		}
		t.vocab[tok] = int32(id)
		maxID = max(maxID, id)
	}
	t.tokens = make([]string, maxID+1)
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

// normalizer reads the normalizer: Sequence, Prepend, Replace (string pattern), NFC/NFD/NFKC/NFKD.
func (l *loader) normalizer(raw json.RawMessage, field string) ([]func(string) string, error) {
	if !isSet(raw) {
		return nil, nil
	}
	typ, err := l.typeOf(raw, field)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		return sequence(l, raw, field, "normalizers", func(item json.RawMessage, f string) ([]func(string) string, error) {
			return l.normalizer(item, f)
		})
	case "Prepend":
		var c struct {
			Prepend *string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Prepend == nil {
			return nil, l.errf(field+".prepend", "missing or not a string")
		}
		p := *c.Prepend
		return []func(string) string{func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}}, nil
	case "Replace":
		from, to, err := l.replace(raw, field)
		if err != nil {
			return nil, err
		}
		return []func(string) string{func(s string) string { return strings.ReplaceAll(s, from, to) }}, nil
	case "NFC", "NFD", "NFKC", "NFKD":
		form := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}[typ]
		return []func(string) string{form.String}, nil
	}
	return nil, l.errf(field+".type", "normalizer %q is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)", typ)
}

// replace reads a Replace component with a String pattern.
func (l *loader) replace(raw json.RawMessage, field string) (from, to string, err error) {
	var c struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", "", l.errf(field, "%v", err)
	}
	if c.Pattern.Regex != nil {
		return "", "", l.errf(field+".pattern.Regex", "%q: only String patterns are supported in Replace", *c.Pattern.Regex)
	}
	if c.Pattern.String == nil || *c.Pattern.String == "" {
		return "", "", l.errf(field+".pattern.String", "missing or empty")
	}
	if c.Content == nil {
		return "", "", l.errf(field+".content", "missing")
	}
	return *c.Pattern.String, *c.Content, nil
}

// preTokenizer reads the pre-tokenizer: Sequence, Split (a known regex), ByteLevel, Metaspace.
// byteLevel is set when a ByteLevel step maps bytes to characters.
func (l *loader) preTokenizer(raw json.RawMessage, field string, byteLevel *bool) ([]preStep, error) {
	if !isSet(raw) {
		return nil, nil
	}
	typ, err := l.typeOf(raw, field)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		return sequence(l, raw, field, "pretokenizers", func(item json.RawMessage, f string) ([]preStep, error) {
			return l.preTokenizer(item, f, byteLevel)
		})
	case "Split":
		var c struct {
			Pattern struct {
				String *string `json:"String"`
				Regex  *string `json:"Regex"`
			} `json:"pattern"`
			Behavior string `json:"behavior"`
			Invert   bool   `json:"invert"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, l.errf(field, "%v", err)
		}
		if c.Pattern.Regex == nil {
			return nil, l.errf(field+".pattern", "only Regex patterns are supported in Split")
		}
		m, ok := knownPatterns[*c.Pattern.Regex]
		if !ok {
			return nil, l.errf(field+".pattern.Regex", "%q is not one of the known pre-tokenizer regexes (GPT-2, Llama-3, Qwen)", *c.Pattern.Regex)
		}
		if c.Invert {
			return nil, l.errf(field+".invert", "true is not supported")
		}
		var split func(string, matcher, []string) []string
		switch c.Behavior {
		case "Isolated":
			split = splitPieces
		case "Removed":
			split = matchPieces
		default:
			return nil, l.errf(field+".behavior", "%q is not supported (Isolated, Removed)", c.Behavior)
		}
		return []preStep{func(pieces []string, _ bool) []string {
			out := make([]string, 0, len(pieces)*4)
			for _, p := range pieces {
				out = split(p, m, out)
			}
			return out
		}}, nil
	case "ByteLevel":
		var c struct {
			AddPrefixSpace bool  `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, l.errf(field, "%v", err)
		}
		if *byteLevel {
			return nil, l.errf(field, "a second ByteLevel step would map bytes twice")
		}
		*byteLevel = true
		useRegex := c.UseRegex == nil || *c.UseRegex
		prefix := c.AddPrefixSpace
		return []preStep{func(pieces []string, _ bool) []string {
			out := make([]string, 0, len(pieces))
			for _, p := range pieces {
				if prefix && !strings.HasPrefix(p, " ") {
					p = " " + p
				}
				if useRegex {
					start := len(out)
					out = matchPieces(p, matchGPT2, out)
					for i := start; i < len(out); i++ {
						out[i] = byteMap(out[i])
					}
					continue
				}
				out = append(out, byteMap(p))
			}
			return out
		}}, nil
	case "Metaspace":
		var c struct {
			Replacement    *string `json:"replacement"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			PrependScheme  *string `json:"prepend_scheme"`
			Split          *bool   `json:"split"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, l.errf(field, "%v", err)
		}
		if c.Replacement == nil || *c.Replacement == "" {
			return nil, l.errf(field+".replacement", "missing or empty")
		}
		rep := *c.Replacement
		scheme := "always"
		if c.PrependScheme != nil {
			scheme = *c.PrependScheme
		} else if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			scheme = "never"
		}
		switch scheme {
		case "always", "first", "never":
		default:
			return nil, l.errf(field+".prepend_scheme", "%q is not supported (always, first, never)", scheme)
		}
		split := c.Split == nil || *c.Split
		return []preStep{func(pieces []string, first bool) []string {
			out := make([]string, 0, len(pieces))
			for _, p := range pieces {
				p = strings.ReplaceAll(p, " ", rep)
				if !strings.HasPrefix(p, rep) && (scheme == "always" || scheme == "first" && first) {
					p = rep + p
				}
				if !split {
					out = append(out, p)
					continue
				}
				// Split before every replacement character, which starts its word.
				for p != "" {
					i := strings.Index(p[1:], rep)
					if i < 0 {
						out = append(out, p)
						break
					}
					out = append(out, p[:i+1])
					p = p[i+1:]
				}
			}
			return out
		}}, nil
	}
	return nil, l.errf(field+".type", "pre-tokenizer %q is not supported (supported: Sequence, Split, ByteLevel, Metaspace)", typ)
}

// postProcessor reads the post-processor: TemplateProcessing, ByteLevel (ids unchanged), Sequence.
func (l *loader) postProcessor(t *Tokenizer, raw json.RawMessage, field string) error {
	if !isSet(raw) {
		return nil
	}
	typ, err := l.typeOf(raw, field)
	if err != nil {
		return err
	}
	switch typ {
	case "ByteLevel":
		return nil
	case "Sequence":
		var c struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return l.errf(field, "%v", err)
		}
		for i, p := range c.Processors {
			if err := l.postProcessor(t, p, fmt.Sprintf("%s.processors[%d]", field, i)); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
		var c struct {
			Single []struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			} `json:"single"`
			SpecialTokens map[string]struct {
				IDs []int `json:"ids"`
			} `json:"special_tokens"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return l.errf(field, "%v", err)
		}
		if len(t.prefix)+len(t.suffix) > 0 {
			return l.errf(field, "a second template")
		}
		seen := false
		for i, item := range c.Single {
			f := fmt.Sprintf("%s.single[%d]", field, i)
			switch {
			case item.Sequence != nil:
				if item.Sequence.ID != "A" || seen {
					return l.errf(f+".Sequence.id", "%q: the single template must hold sequence A once", item.Sequence.ID)
				}
				seen = true
			case item.SpecialToken != nil:
				var ids []int
				if st, ok := c.SpecialTokens[item.SpecialToken.ID]; ok {
					ids = st.IDs
				} else if id, ok := t.vocab[item.SpecialToken.ID]; ok {
					ids = []int{int(id)}
				} else {
					return l.errf(f+".SpecialToken.id", "%q is neither in special_tokens nor a token", item.SpecialToken.ID)
				}
				for _, id := range ids {
					if id < 0 || id >= len(t.tokens) {
						return l.errf(f+".SpecialToken.id", "%q has id %d outside the vocabulary", item.SpecialToken.ID, id)
					}
				}
				if seen {
					t.suffix = append(t.suffix, ids...)
				} else {
					t.prefix = append(t.prefix, ids...)
				}
			default:
				return l.errf(f, "neither SpecialToken nor Sequence")
			}
		}
		if !seen {
			return l.errf(field+".single", "has no Sequence A")
		}
		return nil
	}
	return l.errf(field+".type", "post-processor %q is not supported (supported: TemplateProcessing, ByteLevel, Sequence)", typ)
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

// spaceMark is SentencePiece's space, U+2581.
const spaceMark = "▁"

// mergesStayInWords reports whether every merged token has the form ▁*[^▁]*. Then no merge can
// join a character to a "▁" after it, so BPE over a whole section (Llama-2 and Mistral files have
// no pre-tokenizer: a text is one piece) gives the same tokens as BPE over its words cut before
// each "▁" that follows another character; the words are short and repeat, so the piece cache
// makes a long text linear instead of one heap over every character.
func mergesStayInWords(t *Tokenizer) bool {
	for _, m := range t.merges {
		tok := strings.TrimLeft(t.tokens[m.id], spaceMark)
		if strings.Contains(tok, spaceMark) {
			return false
		}
	}
	return true
}

// splitWords cuts s before every "▁" that follows a character other than "▁".
func splitWords(s string, dst []string) []string {
	start, afterMark := 0, true
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], spaceMark) {
			if !afterMark {
				dst = append(dst, s[start:i])
				start = i
			}
			afterMark = true
			i += len(spaceMark)
			continue
		}
		afterMark = false
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if start < len(s) {
		dst = append(dst, s[start:])
	}
	return dst
}
