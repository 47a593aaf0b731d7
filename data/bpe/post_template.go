package bpe

import (
	"encoding/json"
	"fmt"
)

// postTemplate is the TemplateProcessing post-processor (Llama-2's "<s> $A"), its single template
// resolved at load time to the ids before and after sequence A. The pair template is never used:
// Encode takes one text.
type postTemplate struct {
	prefix, suffix []int
}

func newPostTemplate(b *build, raw json.RawMessage, field string) (postProcessor, error) {
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
		return nil, b.errf(field, "%v", err)
	}
	if b.templated {
		return nil, b.errf(field, "a second template")
	}
	p := &postTemplate{}
	seen := false
	for i, item := range c.Single {
		f := fmt.Sprintf("%s.single[%d]", field, i)
		switch {
		case item.Sequence != nil:
			if item.Sequence.ID != "A" || seen {
				return nil, b.errf(f+".Sequence.id", "%q: the single template must hold sequence A once", item.Sequence.ID)
			}
			seen = true
		case item.SpecialToken != nil:
			var ids []int
			if st, ok := c.SpecialTokens[item.SpecialToken.ID]; ok {
				ids = st.IDs
			} else if id, ok := b.t.vocab[item.SpecialToken.ID]; ok {
				ids = []int{int(id)}
			} else {
				return nil, b.errf(f+".SpecialToken.id", "%q is neither in special_tokens nor a token", item.SpecialToken.ID)
			}
			for _, id := range ids {
				if id < 0 || id >= len(b.t.tokens) {
					return nil, b.errf(f+".SpecialToken.id", "%q has id %d outside the vocabulary", item.SpecialToken.ID, id)
				}
			}
			if seen {
				p.suffix = append(p.suffix, ids...)
			} else {
				p.prefix = append(p.prefix, ids...)
			}
		default:
			return nil, b.errf(f, "neither SpecialToken nor Sequence")
		}
	}
	if !seen {
		return nil, b.errf(field+".single", "has no Sequence A")
	}
	// A template that adds nothing does not count: a later one is then the only one.
	b.templated = len(p.prefix)+len(p.suffix) > 0
	return p, nil
}

// PostProcess adds the template's tokens.
func (p *postTemplate) PostProcess(prefix, suffix []int) ([]int, []int) {
	return append(prefix, p.prefix...), append(suffix, p.suffix...)
}
