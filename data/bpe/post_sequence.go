package bpe

import (
	"encoding/json"
	"fmt"
)

// postSequence is the Sequence post-processor: its processors applied in order.
type postSequence []postProcessor

func newPostSequence(b *build, raw json.RawMessage, field string) (postProcessor, error) {
	var c struct {
		Processors []json.RawMessage `json:"processors"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, b.errf(field, "%v", err)
	}
	var q postSequence
	for i, item := range c.Processors {
		if !isSet(item) {
			continue // a null processor adds nothing
		}
		p, err := postProcessorTypes.read(b, item, fmt.Sprintf("%s.processors[%d]", field, i))
		if err != nil {
			return nil, err
		}
		q = append(q, p)
	}
	return q, nil
}

// PostProcess lets each processor add its tokens after those of the one before.
func (q postSequence) PostProcess(prefix, suffix []int) ([]int, []int) {
	for _, p := range q {
		prefix, suffix = p.PostProcess(prefix, suffix)
	}
	return prefix, suffix
}
