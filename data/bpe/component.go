package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The components of a tokenizer.json, one Go type per "type" a file may name, as Hugging Face
// tokenizers lays them out. Each type reads its own JSON object in its constructor, refusing what
// it does not implement with the path of the offending key, and is registered by name in
// registry.go, so supporting a new component is one file and one registry line.

// normalizer is a "normalizer" component: it rewrites the text of a section before
// pre-tokenization.
type normalizer interface {
	Normalize(s string) string
}

// preTokenizer is a "pre_tokenizer" component: it cuts the pieces so far into smaller ones. first
// is whether the section being tokenized starts the text (Metaspace's prepend_scheme "first").
type preTokenizer interface {
	PreTokenize(pieces []string, first bool) []string
}

// decoder is a "decoder" component: it maps tokens to tokens (transformers.js's decode_chain).
type decoder interface {
	Decode(tokens []string) []string
}

// postProcessor is a "post_processor" component. Only a single text is ever encoded, and every
// supported post-processor puts fixed special tokens around it, so a post-processor is resolved at
// load time to the ids it adds: it appends to prefix and suffix what it puts before and after the
// text's ids.
type postProcessor interface {
	PostProcess(prefix, suffix []int) ([]int, []int)
}

// build is what a constructor reads besides its own JSON object: the loader that names the file
// in errors, the tokenizer assembled so far (model and added tokens are read before any other
// component), and what components read earlier have fixed.
type build struct {
	*loader
	t *Tokenizer
	// byteLevel is set once a ByteLevel pre-tokenizer maps bytes to characters; a second one
	// would map them twice.
	byteLevel bool
	// templated is set once a TemplateProcessing has put special tokens around the text; a
	// second one is refused rather than guessing how they combine.
	templated bool
}

// constructor reads one component: raw is its JSON object, field its path in the file.
type constructor[T any] func(b *build, raw json.RawMessage, field string) (T, error)

// entry is one supported component type.
type entry[T any] struct {
	name      string
	construct constructor[T]
}

// registry holds the supported types of one kind of component. It is a list rather than a map so
// that a refusal names the supported types in a fixed order.
type registry[T any] struct {
	kind  string // the kind as refusals name it: "pre-tokenizer"
	types []entry[T]
}

// read decodes the component at field with the constructor its "type" names. An absent or null
// component is the zero T (none).
func (r *registry[T]) read(b *build, raw json.RawMessage, field string) (T, error) {
	var none T
	if !isSet(raw) {
		return none, nil
	}
	typ, err := b.typeOf(raw, field)
	if err != nil {
		return none, err
	}
	for _, e := range r.types {
		if e.name == typ {
			return e.construct(b, raw, field)
		}
	}
	return none, b.errf(field+".type", "%s %q is not supported (supported: %s)", r.kind, typ, strings.Join(r.names(), ", "))
}

// names lists the supported types in registry order.
func (r *registry[T]) names() []string {
	out := make([]string, len(r.types))
	for i, e := range r.types {
		out[i] = e.name
	}
	return out
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

// readSequence reads the items of a Sequence component, listed under key, each through r (its
// path field.key[i]); null items are no step and are dropped.
func readSequence[T any](b *build, r *registry[T], raw json.RawMessage, field, key string) ([]T, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	var items []json.RawMessage
	if v, ok := c[key]; ok && isSet(v) {
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, b.errf(field+"."+key, "%v", err)
		}
	}
	var out []T
	for i, item := range items {
		if !isSet(item) {
			continue
		}
		x, err := r.read(b, item, fmt.Sprintf("%s.%s[%d]", field, key, i))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// readReplace reads the pattern and content of a Replace normalizer or decoder; only String
// patterns are supported.
func (l *loader) readReplace(raw json.RawMessage, field string) (from, to string, err error) {
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
