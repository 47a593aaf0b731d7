package bpe

import (
	"encoding/json"
	"strings"
)

// decFuse is the Fuse decoder: all tokens become one, so that later decoders (Strip) see the
// whole text.
type decFuse struct{}

func newDecFuse(*build, json.RawMessage, string) (decoder, error) { return decFuse{}, nil }

// Decode joins the tokens.
func (decFuse) Decode(tokens []string) []string { return []string{strings.Join(tokens, "")} }
