package bpe

import "encoding/json"

// postByteLevel is the ByteLevel post-processor (Llama-3, Qwen): it only trims offsets, which this
// package does not report, so the ids are unchanged.
type postByteLevel struct{}

func newPostByteLevel(*build, json.RawMessage, string) (postProcessor, error) {
	return postByteLevel{}, nil
}

// PostProcess adds nothing.
func (postByteLevel) PostProcess(prefix, suffix []int) ([]int, []int) { return prefix, suffix }
