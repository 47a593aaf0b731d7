package bpe_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/bpe"
)

// sequenceKeys is, for each component key of tokenizer.json, the key its Sequence lists items under.
var sequenceKeys = map[string]string{
	"normalizer":     "normalizers",
	"pre_tokenizer":  "pretokenizers",
	"decoder":        "decoders",
	"post_processor": "processors",
}

// componentTypes appends the "type" of every object in v, however deeply nested, so that a
// component found anywhere (not only in a Sequence's list) is counted.
func componentTypes(v any, dst []string) []string {
	switch v := v.(type) {
	case map[string]any:
		if typ, ok := v["type"].(string); ok {
			dst = append(dst, typ)
		}
		for _, x := range v {
			dst = componentTypes(x, dst)
		}
	case []any:
		for _, x := range v {
			dst = componentTypes(x, dst)
		}
	}
	return dst
}

// TestRegistryCoversRealFiles: every component type the three real tokenizer.json files name is
// registered under its kind.
func TestRegistryCoversRealFiles(t *testing.T) {
	supported := bpe.ComponentTypes()
	for kind, names := range supported {
		for i, n := range names {
			if slices.Contains(names[:i], n) {
				t.Errorf("%s: %q is registered twice", kind, n)
			}
		}
	}
	for _, name := range realTokenizers {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(tokenizersDir(t), name, "tokenizer.json")
			b, err := os.ReadFile(path)
			if err != nil {
				skipOrFail(t, "no %s", path)
			}
			var f map[string]any
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			found := 0
			for kind := range sequenceKeys {
				for _, typ := range componentTypes(f[kind], nil) {
					found++
					if !slices.Contains(supported[kind], typ) {
						t.Errorf("%s: %s type %q is not registered (registered: %v)", path, kind, typ, supported[kind])
					}
				}
			}
			if found == 0 {
				t.Errorf("%s: no component found", path)
			}
		})
	}
}

// TestUnknownTypeRefused: an unregistered type is refused, at the top of each kind and inside its
// Sequence, with an error naming the file, the type, the path of its key and the supported types.
func TestUnknownTypeRefused(t *testing.T) {
	unknown := map[string]any{"type": "Bogus"}
	for kind, key := range sequenceKeys {
		for _, c := range []struct {
			component any
			field     string
		}{
			{unknown, kind + ".type"},
			{map[string]any{"type": "Sequence", key: []any{nil, unknown}}, fmt.Sprintf("%s.%s[1].type", kind, key)},
		} {
			tj := map[string]any{
				"added_tokens": []any{},
				"model": map[string]any{
					"type": "BPE", "vocab": map[string]any{"a": 0, "b": 1, "ab": 2}, "merges": []any{"a b"},
				},
				kind: c.component,
			}
			b, err := json.Marshal(tj)
			if err != nil {
				t.Fatal(err)
			}
			_, err = bpe.Parse(b, nil, "hostile.json")
			if err == nil {
				t.Errorf("%s: Bogus loaded", c.field)
				continue
			}
			msg := err.Error()
			for _, want := range append([]string{"hostile.json", c.field, `"Bogus"`}, bpe.ComponentTypes()[kind]...) {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: error %q does not name %s", c.field, msg, want)
				}
			}
		}
	}
}
